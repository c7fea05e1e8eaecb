"""A daemon's deployment from one TOML file: the tree, the providers, the pool, rate
limits, the journal and the daemon's own settings. Code stays the primary way — this is
what an operator edits without touching it::

    [daemon]
    grace = 30              # seconds for runs in flight at SIGTERM
    metrics_port = 9464     # optional: Prometheus metrics (extra "prometheus")

    [journal]
    path = "runs.journal"   # SQLite; or dsn_env = "JOURNAL_DSN" for PostgreSQL
    lease_ttl = 30

    [tree]                  # the root supervisor, as load_spec takes it
    max_restarts = 5
    period = 10

    [providers.alpha]
    kind = "openai"         # or "anthropic"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"   # the variable's name: never the key itself
    connect_timeout = 5
    read_timeout = 60
    requests_per_minute = 500        # optional rate limits of this provider
    tokens_per_minute = 200000

    [pool]
    targets = [{provider = "alpha", model = "gpt-4o"}, {provider = "beta", model = "sonnet"}]
    deadline = 30           # optional: seconds per request, every attempt included
    hedge_after = 2         # optional

:func:`load_deployment` structures it with cattrs and raises one ``config_invalid``
naming every problem by its path (``must be a finite number of seconds > 0, got -1 @
$.providers['alpha'].read_timeout``), including those across sections (a pool target naming
no provider, an API-key variable that is not set, neither or both journal settings).
A :class:`Deployment` then builds the pieces: :meth:`Deployment.spec` (the tree with a
provider actor per provider, ids = their names), :meth:`Deployment.provider_pool`,
:meth:`Deployment.journal_store`.
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from actors import ActorError, Code
from actors.checks import (
    CHECK,
    FieldProblem,
    checked,
    env_variable,
    http_url,
    non_empty_str,
    optional,
    per_minute,
    seconds,
    shown,
)
from actors.providers import AnthropicProvider, OpenAIProvider, ProviderConfig
from supervisors.pool import ProviderPool, Target
from supervisors.resilience.ratelimit import RateLimit, RateLimiter
from supervisors.resilience.resilient import Resilience
from supervisors.tree import Tree
from supervisors.tree.spec import ChildSpec, SupervisorSpec, load_spec

_ADAPTERS: Final = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}


def _port(value: Any) -> str | None:
    if value is None or (type(value) is int and 0 <= value <= 65535):
        return None
    return f"must be a port number from 0 to 65535, got {shown(value)}"


def _kind(value: Any) -> str | None:
    if value in _ADAPTERS:
        return None
    return f"must be one of 'openai', 'anthropic', got {shown(value)}"


@attrs.frozen(kw_only=True)
class ProviderSection:
    """One provider endpoint: its wire format (``kind``), URL, the *name* of the
    environment variable holding its key, timeouts, and optional rate limits."""

    kind: Literal["openai", "anthropic"] = attrs.field(metadata=checked(_kind))
    base_url: str = attrs.field(metadata=checked(http_url))
    api_key_env: str = attrs.field(metadata=checked(env_variable()))
    connect_timeout: float = attrs.field(default=5.0, metadata=checked(seconds()))
    read_timeout: float = attrs.field(default=60.0, metadata=checked(seconds()))
    requests_per_minute: float | None = attrs.field(default=None, metadata=checked(per_minute))
    tokens_per_minute: float | None = attrs.field(default=None, metadata=checked(per_minute))


@attrs.frozen(kw_only=True)
class TargetSection:
    """One target of the pool: a provider of ``[providers]`` and a model."""

    provider: str = attrs.field(metadata=checked(non_empty_str))
    model: str = attrs.field(metadata=checked(non_empty_str))


@attrs.frozen(kw_only=True)
class PoolSection:
    """The pool's targets in preference order, a per-request ``deadline`` and
    ``hedge_after`` (both optional, seconds)."""

    targets: tuple[TargetSection, ...]
    deadline: float | None = attrs.field(default=None, metadata=checked(seconds(optional=True)))
    hedge_after: float | None = attrs.field(default=None, metadata=checked(seconds(optional=True)))


@attrs.frozen(kw_only=True)
class JournalSection:
    """The journal: a SQLite ``path`` (default ``runs.journal``), or ``dsn_env`` (the
    name of the environment variable holding a PostgreSQL DSN — it carries a password);
    ``lease_ttl`` for PostgreSQL."""

    path: str | None = attrs.field(default=None, metadata=checked(optional(non_empty_str)))
    dsn_env: str | None = attrs.field(default=None, metadata=checked(env_variable(optional=True)))
    lease_ttl: float = attrs.field(default=30.0, metadata=checked(seconds()))


@attrs.frozen(kw_only=True)
class DaemonSection:
    """The daemon's own settings: the shutdown ``grace`` and the metrics port."""

    grace: float = attrs.field(default=30.0, metadata=checked(seconds(zero=True)))
    metrics_port: int | None = attrs.field(default=None, metadata=checked(_port))


@attrs.frozen(kw_only=True)
class Deployment:
    """A whole deployment (see the module docstring); made by :func:`load_deployment`."""

    providers: Mapping[str, ProviderSection]
    pool: PoolSection
    tree: SupervisorSpec = attrs.field(factory=SupervisorSpec)
    journal: JournalSection = attrs.field(factory=JournalSection)
    daemon: DaemonSection = attrs.field(factory=DaemonSection)
    #: Where the variables are read, when a request is made: the mapping given to
    #: :func:`load_deployment`, or ``None`` for the process's environment (so a rotated
    #: key is picked up). Never a copy of the process's environment.
    environ: Mapping[str, str] | None = attrs.field(default=None, repr=False)

    def _read(self, variable: str) -> str:
        return (os.environ if self.environ is None else self.environ)[variable]

    def provider_config(self, name: str) -> ProviderConfig:
        """The :class:`~actors.providers.ProviderConfig` of provider ``name`` (its key
        read from its variable when a request is made)."""
        section = self.providers[name]
        return ProviderConfig(
            name=name,
            base_url=section.base_url,
            api_key=lambda: self._read(section.api_key_env),
            connect_timeout=float(section.connect_timeout),
            read_timeout=float(section.read_timeout),
        )

    def spec(self, *children: ChildSpec) -> SupervisorSpec:
        """The root supervisor of ``[tree]`` with one provider actor per provider (its
        id is the provider's name), then ``children`` (tool hosts, your actors)."""
        providers = [
            ChildSpec(
                id=name,
                actor=_ADAPTERS[section.kind],
                args=(self.provider_config(name),),
            )
            for name, section in self.providers.items()
        ]
        return attrs.evolve(self.tree, children=(*self.tree.children, *providers, *children))

    def provider_pool(self, tree: Tree, **options: Any) -> ProviderPool:
        """The pool of ``[pool]`` over the provider actors of ``tree`` (a tree started
        from :meth:`spec`), with the providers' rate limits; ``options`` go to
        :class:`~supervisors.ProviderPool` (a budget, prices, a breaker in a
        ``resilience``)."""
        section = self.pool
        limits = {
            name: RateLimit(
                requests_per_minute=provider.requests_per_minute,
                tokens_per_minute=provider.tokens_per_minute,
            )
            for name, provider in self.providers.items()
            if provider.requests_per_minute is not None or provider.tokens_per_minute is not None
        }
        if limits and "resilience" not in options:
            options["resilience"] = Resilience(limiter=RateLimiter(limits))
        if section.deadline is not None:
            options.setdefault("deadline", float(section.deadline))
        if section.hedge_after is not None:
            options.setdefault("hedge_after", float(section.hedge_after))
        targets = [
            Target(ref=tree.ref(t.provider), provider=t.provider, model=t.model)
            for t in section.targets
        ]
        return ProviderPool(targets, **options)

    def journal_store(self) -> Any:
        """What :func:`~supervisors.runs.open_journal` takes: the SQLite path, or a
        :class:`~actors.journal.PostgresStore` on the DSN (extra ``postgres``)."""
        if self.journal.dsn_env is None:
            return self.journal.path or "runs.journal"
        from actors.journal import PostgresStore

        return PostgresStore(self._read(self.journal.dsn_env))


@functools.cache
def _converter() -> cattrs.Converter:
    """The converter, made on first use."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)

    def checking(check: Any, type_: Any) -> Any:
        def hook(value: Any, _: Any) -> Any:
            problem = check(value)
            if problem is not None:
                raise FieldProblem(problem)
            return value if value is None else converter.structure(value, type_)

        return hook

    for cls in (ProviderSection, TargetSection, PoolSection, JournalSection, DaemonSection):
        attrs.resolve_types(cls)
        overrides: dict[str, Any] = {
            field.name: override(struct_hook=checking(field.metadata[CHECK], field.type))
            for field in attrs.fields(cls)
            if CHECK in field.metadata
        }
        converter.register_structure_hook(cls, make_dict_structure_fn(cls, converter, **overrides))
    # [tree] goes through load_spec on its own (load_deployment): never structured here.
    converter.register_structure_hook(SupervisorSpec, lambda value, _: value)
    return converter


def _describe(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, FieldProblem):
        return str(exc)
    return cattrs.v.format_exception(exc, type_)


def load_deployment(
    data: Mapping[str, Any] | str, *, environ: Mapping[str, str] | None = None
) -> Deployment:
    """A :class:`Deployment` from a TOML document (or its parsed mapping); the
    variables it names are looked up in ``environ`` (default: the process's environment,
    read again when a key is needed). ``config_invalid`` naming every problem by its
    path (the module docstring); ``input_validation`` when ``environ`` is not a mapping
    of strings."""
    if environ is not None and not (
        isinstance(environ, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in environ.items())
    ):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "load_deployment: environ must map names to strings"
        )
    env: Mapping[str, str] = os.environ if environ is None else environ
    try:
        raw = tomllib.loads(data) if isinstance(data, str) else data
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise _invalid([f"not valid TOML: {type(exc).__name__}: {exc}"]) from exc
    if not isinstance(raw, Mapping):
        raise _invalid([f"expected a table, got {shown(raw)}"])
    raw = dict(raw)
    problems = [
        f"must be a table, got {shown(raw[name])} @ $.{name}"
        for name in ("daemon", "journal", "tree", "providers", "pool")
        if name in raw and not isinstance(raw[name], Mapping)
    ]
    if isinstance(raw.get("providers"), Mapping):
        problems += [
            f"must be a table, got {shown(value)} @ $.providers[{name!r}]"
            for name, value in raw["providers"].items()
            if not isinstance(value, Mapping)
        ]
    if isinstance(raw.get("pool"), Mapping) and "targets" in raw["pool"]:
        targets = raw["pool"]["targets"]
        if not isinstance(targets, list | tuple) or not all(
            isinstance(t, Mapping) for t in targets
        ):
            problems.append(
                f"must be a list of {{provider, model}} tables, got {shown(targets)}"
                " @ $.pool.targets"
            )
    if "environ" in raw:
        problems.append("extra fields found (environ) @ $")
    if problems:
        raise _invalid(problems)
    tree, tree_problems = _tree(raw.pop("tree", {}))
    try:
        deployment = _converter().structure({**raw, "environ": None}, Deployment)
    except cattrs.BaseValidationError as exc:
        problems += cattrs.transform_error(exc, format_exception=_describe)
        raise _invalid(problems + tree_problems) from exc
    problems += tree_problems + _across(deployment, tree, env)
    if problems:
        raise _invalid(problems)
    return attrs.evolve(deployment, tree=tree, environ=environ)


def _tree(raw: Any) -> tuple[SupervisorSpec, list[str]]:
    """The ``[tree]`` section through :func:`~supervisors.load_spec`, its problems'
    paths put under ``$.tree``."""
    try:
        return load_spec(raw), []
    except ActorError as error:
        problems = error.message.removeprefix("invalid supervisor spec: ").split("; ")
        return SupervisorSpec(), [
            p.replace(" @ $", " @ $.tree", 1) if " @ $" in p else f"{p} @ $.tree" for p in problems
        ]


def _across(deployment: Deployment, tree: SupervisorSpec, env: Mapping[str, str]) -> list[str]:
    """The rules across sections."""
    children = {child.id for child in tree.children}
    problems = [
        f"is the id of a child of [tree] already, got {name!r} @ $.providers[{name!r}]"
        for name in deployment.providers
        if name in children
    ]
    problems += [
        f"environment variable {section.api_key_env!r} is not set"
        f" @ $.providers[{name!r}].api_key_env"
        for name, section in deployment.providers.items()
        if section.api_key_env not in env
    ]
    if not deployment.providers:
        problems.append("must name at least one provider @ $.providers")
    if not deployment.pool.targets:
        problems.append("must list at least one target @ $.pool.targets")
    problems += [
        f"names no provider of [providers], got {target.provider!r}"
        f" @ $.pool.targets[{index}].provider"
        for index, target in enumerate(deployment.pool.targets)
        if target.provider not in deployment.providers
    ]
    journal = deployment.journal
    if journal.path is not None and journal.dsn_env is not None:
        problems.append("must have path or dsn_env, not both @ $.journal")
    elif journal.dsn_env is not None and journal.dsn_env not in env:
        problems.append(f"environment variable {journal.dsn_env!r} is not set @ $.journal.dsn_env")
    return problems


def _invalid(problems: list[str]) -> ActorError:
    return ActorError.from_code(Code.CONFIG_INVALID, "invalid deployment: " + "; ".join(problems))
