"""The Lua scripts of the Redis state backend: one script per operation, each atomic on
the server and timed by the server's clock (``TIME``), never a replica's.

Conventions shared by every script:

* floats travel as strings both ways (Lua would truncate a number reply to an integer);
  ``"inf"`` is infinity;
* a breaker is a hash: ``st`` (``closed``/``open``/``half_open``; no hash = closed and
  clean), ``f`` failures, ``s`` probe successes, ``pa`` the probe time, ``lu`` the end of
  the probe lease, ``lh`` the lease holder, ``code``, ``cd`` cooldown, ``perm`` (``1`` =
  open until reset);
* a token bucket is a string ``"<level> <time>"``: its level at the time it was last
  brought up to date. It expires when it would have refilled to capacity, so an idle or
  abandoned bucket (a reservation whose caller died) leaves nothing behind: a missing
  bucket is full;
* budget usage is a hash: ``t`` tokens, ``c`` cost, ``n`` turns, kept ``ttl`` seconds,
  beside the set of the increment ids already applied (each increment is applied once).
"""

from __future__ import annotations

from typing import Final

_CLOCK: Final = """
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""

#: KEYS[1] breaker; ARGV: lease_ttl, holder.
#: -> {admitted, probe, retry_after, transition_from, code, cooldown, clean}
BREAKER_ADMIT: Final = (
    _CLOCK
    + """
local k = KEYS[1]
local st = redis.call('HGET', k, 'st')
if not st then return {1, 0, '0', '', '', '', 1} end
if st == 'closed' then
  if tonumber(redis.call('HGET', k, 'f') or '0') > 0 then return {1, 0, '0', '', '', '', 0} end
  return {1, 0, '0', '', '', '', 1}
end
local now = clock()
local code = redis.call('HGET', k, 'code') or ''
local cd = redis.call('HGET', k, 'cd') or ''
local from = ''
if st == 'open' then
  if redis.call('HGET', k, 'perm') == '1' then return {0, 0, 'inf', '', '', '', 0} end
  local pa = tonumber(redis.call('HGET', k, 'pa'))
  if now < pa then return {0, 0, tostring(pa - now), '', '', '', 0} end
  redis.call('HSET', k, 'st', 'half_open', 's', 0, 'lu', 0)
  from = 'open'
end
local lu = tonumber(redis.call('HGET', k, 'lu') or '0')
if now < lu then return {0, 0, tostring(lu - now), from, code, cd, 0} end
redis.call('HSET', k, 'lu', tostring(now + tonumber(ARGV[1])), 'lh', ARGV[2])
return {1, 1, '0', from, code, cd, 0}
"""
)

#: KEYS[1] breaker; ARGV: probe (0/1), success_threshold, holder. -> transition_from or ''
BREAKER_SUCCESS: Final = """
local k = KEYS[1]
local st = redis.call('HGET', k, 'st')
if not st then return '' end
if st == 'closed' then redis.call('DEL', k) return '' end
if ARGV[1] ~= '1' or st ~= 'half_open' or redis.call('HGET', k, 'lh') ~= ARGV[3] then
  return ''
end
local s = redis.call('HINCRBY', k, 's', 1)
redis.call('HSET', k, 'lu', 0, 'lh', '')
if s < tonumber(ARGV[2]) then return '' end
redis.call('DEL', k)
return st
"""

#: KEYS[1] breaker; ARGV: probe, code, threshold, cooldown, probe_after, permanent, holder.
#: -> transition_from or ''
BREAKER_FAILURE: Final = (
    _CLOCK
    + """
local k = KEYS[1]
local st = redis.call('HGET', k, 'st') or 'closed'
local perm = ARGV[6] == '1'
local probe = ARGV[1] == '1' and redis.call('HGET', k, 'lh') == ARGV[7]
if st == 'open' and not perm then return '' end
if st == 'half_open' and not probe and not perm then return '' end
if st == 'closed' and not perm then
  redis.call('HSET', k, 'st', 'closed')
  if redis.call('HINCRBY', k, 'f', 1) < tonumber(ARGV[3]) then return '' end
end
redis.call('HSET', k, 'st', 'open', 'f', 0, 's', 0, 'lu', 0, 'lh', '', 'code', ARGV[2])
if perm then
  redis.call('HSET', k, 'perm', 1, 'pa', 'inf', 'cd', 'inf')
else
  redis.call('HSET', k, 'perm', 0, 'pa', tostring(clock() + tonumber(ARGV[5])), 'cd', ARGV[4])
end
return st
"""
)

#: KEYS[1] breaker; ARGV: holder. Frees the probe lease if this holder has it.
BREAKER_RELEASE: Final = """
local k = KEYS[1]
if redis.call('HGET', k, 'st') == 'half_open' and redis.call('HGET', k, 'lh') == ARGV[1] then
  redis.call('HSET', k, 'lu', 0, 'lh', '')
end
return ''
"""

#: KEYS[1] breaker. -> the state it was in ('' = closed and clean)
BREAKER_RESET: Final = """
local st = redis.call('HGET', KEYS[1], 'st') or ''
redis.call('DEL', KEYS[1])
return st
"""

#: KEYS[1] breaker. -> the state a reader sees now (an open breaker whose probe time
#: came reads half_open; a permanent one stays open); changes nothing.
BREAKER_STATE: Final = (
    _CLOCK
    + """
local k = KEYS[1]
local st = redis.call('HGET', k, 'st')
if not st then return 'closed' end
if st == 'open' and redis.call('HGET', k, 'perm') ~= '1' then
  if clock() >= tonumber(redis.call('HGET', k, 'pa')) then return 'half_open' end
end
return st
"""
)

_REFILL: Final = """
local function level_of(key, cap, rate, now)
  local v = redis.call('GET', key)
  if not v then return cap end
  local sep = string.find(v, ' ', 1, true)
  local level, u = tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
  if now > u then
    level = level + (now - u) * rate
    if level > cap then level = cap end
  end
  return level
end
local function store(key, level, cap, rate, now)
  local value = string.format('%.17g %.17g', level, now)
  if rate > 0 then
    redis.call('SET', key, value, 'PX', math.ceil(((cap - level) / rate + 1) * 1000))
  else
    redis.call('SET', key, value)
  end
end
"""

#: KEYS: buckets; ARGV: max_wait ('' = none), then amount, capacity, rate per bucket.
#: -> {granted, wait, level after, per bucket...}
RESERVE: Final = (
    _CLOCK
    + _REFILL
    + """
local now = clock()
local levels, wait = {}, 0
for i = 1, #KEYS do
  local amount, cap, rate = tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i]), tonumber(ARGV[3*i+1])
  local level = level_of(KEYS[i], cap, rate, now)
  levels[i] = level
  local short = amount - level
  if short > 0 then
    local need = math.huge
    if rate > 0 then need = short / rate end
    if need > wait then wait = need end
  end
end
local reply = {0, tostring(wait)}
if ARGV[1] ~= '' and wait > tonumber(ARGV[1]) then
  for i = 1, #KEYS do reply[i + 2] = tostring(levels[i]) end
  return reply
end
reply[1] = 1
for i = 1, #KEYS do
  local amount, cap, rate = tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i]), tonumber(ARGV[3*i+1])
  store(KEYS[i], levels[i] - amount, cap, rate, now)
  reply[i + 2] = tostring(levels[i] - amount)
end
return reply
"""
)

#: KEYS: buckets; ARGV: amount, capacity, rate per bucket. Gives back (or charges).
REFUND: Final = (
    _CLOCK
    + _REFILL
    + """
local now = clock()
for i = 1, #KEYS do
  local amount, cap, rate = tonumber(ARGV[3*i-2]), tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i])
  local level = level_of(KEYS[i], cap, rate, now) + amount
  if level > cap then level = cap end
  store(KEYS[i], level, cap, rate, now)
end
return ''
"""
)

#: KEYS[1] usage, KEYS[2] the ids of the increments applied; ARGV: tokens, cost, turns,
#: ttl seconds, increment id. An increment already applied (its reply lost to a timeout,
#: then sent again on recovery) is not added twice. -> {tokens, cost, turns}
ADD_USAGE: Final = """
local k = KEYS[1]
if redis.call('SADD', KEYS[2], ARGV[5]) == 1 then
  redis.call('HINCRBY', k, 't', ARGV[1])
  redis.call('HINCRBYFLOAT', k, 'c', ARGV[2])
  redis.call('HINCRBY', k, 'n', ARGV[3])
end
redis.call('EXPIRE', k, ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
local v = redis.call('HMGET', k, 't', 'c', 'n')
return {v[1] or '0', v[2] or '0', v[3] or '0'}
"""

#: The scripts the backend runs.
NAMES: Final = (
    "BREAKER_ADMIT",
    "BREAKER_SUCCESS",
    "BREAKER_FAILURE",
    "BREAKER_RELEASE",
    "BREAKER_RESET",
    "BREAKER_STATE",
    "RESERVE",
    "REFUND",
    "ADD_USAGE",
)

#: A trivial script: the baseline of the ``redis_limiter`` benchmark.
TRIVIAL: Final = "return 1"
