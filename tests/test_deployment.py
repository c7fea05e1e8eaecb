"""load_deployment: one TOML file for the tree, providers, pool, limits, journal and
daemon — structured with cattrs, every problem named by its path; the pieces it builds
run against the chaos provider."""

from __future__ import annotations

from typing import Any

import pytest

from actors import ActorError
from actors.providers import AnthropicProvider, LlmRequest, Message, OpenAIProvider
from actors.testing.chaos import FaultScript, chaos_server
from supervisors import Deployment, load_deployment, open_tree

ENV = {"ALPHA_KEY": "sk-alpha-secret-1234", "BETA_KEY": "sk-beta-secret-5678"}


def config(url: str = "http://127.0.0.1:9", **sections: str) -> str:
    parts = {
        "daemon": "grace = 5\nmetrics_port = 0",
        "journal": 'path = "deploy.journal"',
        "tree": "max_restarts = 7\nperiod = 20",
        "alpha": f'kind = "openai"\nbase_url = "{url}"\napi_key_env = "ALPHA_KEY"\n'
        "read_timeout = 2\nrequests_per_minute = 600",
        "beta": f'kind = "anthropic"\nbase_url = "{url}"\napi_key_env = "BETA_KEY"',
        "pool": 'targets = [{provider = "alpha", model = "a-1"}, {provider = "beta", model = "b-1"}]'
        "\ndeadline = 10",
    }
    parts.update(sections)
    return "\n".join(
        f"[{'providers.' if name in ('alpha', 'beta') else ''}{name}]\n{body}"
        for name, body in parts.items()
        if body
    )


def test_every_section_is_read() -> None:
    deployment = load_deployment(config(), environ=ENV)
    assert isinstance(deployment, Deployment)
    assert (deployment.daemon.grace, deployment.daemon.metrics_port) == (5.0, 0)
    assert (deployment.journal.path, deployment.journal.lease_ttl) == ("deploy.journal", 30.0)
    assert deployment.journal_store() == "deploy.journal"
    assert (deployment.tree.max_restarts, deployment.tree.period) == (7, 20.0)
    assert list(deployment.providers) == ["alpha", "beta"]
    assert deployment.providers["alpha"].requests_per_minute == 600
    assert [(t.provider, t.model) for t in deployment.pool.targets] == [
        ("alpha", "a-1"),
        ("beta", "b-1"),
    ]
    spec = deployment.spec()
    assert [(c.id, c.actor) for c in spec.children] == [
        ("alpha", OpenAIProvider),
        ("beta", AnthropicProvider),
    ]
    alpha = deployment.provider_config("alpha")
    assert (alpha.name, alpha.read_timeout, alpha.connect_timeout) == ("alpha", 2.0, 5.0)
    assert alpha.resolve_api_key() == "sk-alpha-secret-1234"  # read from its variable


def test_the_defaults() -> None:
    deployment = load_deployment(config(daemon="", journal="", tree=""), environ=ENV)
    assert (deployment.daemon.grace, deployment.daemon.metrics_port) == (30.0, None)
    assert deployment.journal_store() == "runs.journal"
    assert deployment.tree.children == ()
    beta = deployment.providers["beta"]
    assert (beta.connect_timeout, beta.read_timeout, beta.requests_per_minute) == (5.0, 60.0, None)
    assert (deployment.pool.deadline, deployment.pool.hedge_after) == (10.0, None)


async def test_the_pieces_it_builds_serve_a_request(autojump_clock: Any) -> None:
    async with chaos_server(FaultScript()) as server:
        deployment = load_deployment(config(server.url), environ=ENV)
        async with open_tree(deployment.spec()) as tree:
            pool = deployment.provider_pool(tree)
            answer = await pool.complete(
                LlmRequest(model="a-1", messages=[Message(role="user", content="reply: ok")])
            )
        assert answer.content == "ok"
        assert [a.provider for a in pool.ledger] == ["alpha"]
        assert pool.deadline == 10.0
        assert pool.resilience.limiter is not None  # alpha's requests_per_minute
        assert [(r.route, r.model) for r in server.requests] == [("openai", "a-1")]


@pytest.mark.parametrize(
    ("sections", "problem"),
    [
        (
            {"daemon": "grace = -1"},
            "must be a finite number of seconds >= 0, got -1 @ $.daemon.grace",
        ),
        (
            {"daemon": "metrics_port = 70000"},
            "must be a port number from 0 to 65535, got 70000 @ $.daemon.metrics_port",
        ),
        (
            {"daemon": "metrics_port = true"},
            "must be a port number from 0 to 65535, got True @ $.daemon.metrics_port",
        ),
        ({"journal": 'path = ""'}, "must be a non-empty string, got '' @ $.journal.path"),
        (
            {"journal": 'path = "a"\ndsn_env = "B"'},
            "must have path or dsn_env, not both @ $.journal",
        ),
        (
            {"journal": 'dsn_env = "NOT_SET"'},
            "environment variable 'NOT_SET' is not set @ $.journal.dsn_env",
        ),
        (
            {"journal": "lease_ttl = nan"},
            "must be a finite number of seconds > 0, got nan @ $.journal.lease_ttl",
        ),
        ({"tree": "max_restarts = -1"}, "must be an integer >= 0, got -1 @ $.tree.max_restarts"),
        ({"tree": "bogus = 1"}, "extra fields found (bogus) @ $.tree"),
        (
            {"alpha": 'kind = "grpc"\nbase_url = "http://u"\napi_key_env = "ALPHA_KEY"'},
            "must be one of 'openai', 'anthropic', got 'grpc' @ $.providers['alpha'].kind",
        ),
        (
            {"alpha": 'kind = "openai"\nbase_url = "http://u"\napi_key_env = "NOPE"'},
            "environment variable 'NOPE' is not set @ $.providers['alpha'].api_key_env",
        ),
        (
            {
                "alpha": 'kind = "openai"\nbase_url = "http://u"\napi_key_env = "ALPHA_KEY"\nread_timeout = 0'
            },
            "must be a finite number of seconds > 0, got 0 @ $.providers['alpha'].read_timeout",
        ),
        (
            {
                "alpha": 'kind = "openai"\nbase_url = "http://u"\napi_key_env = "ALPHA_KEY"\ntokens_per_minute = -5'
            },
            "must be a finite number > 0 per minute, got -5 @ $.providers['alpha'].tokens_per_minute",
        ),
        (
            {"alpha": 'kind = "openai"\nbase_url = "http://u"'},
            "required field missing @ $.providers['alpha'].api_key_env",
        ),
        (
            {"alpha": 'kind = "openai"\nbase_url = "localhost:8080"\napi_key_env = "ALPHA_KEY"'},
            "must be an http:// or https:// URL with a host, got 'localhost:8080'"
            " @ $.providers['alpha'].base_url",
        ),
        (
            {
                "alpha": 'kind = "openai"\nbase_url = "http://u"\napi_key_env = "ALPHA_KEY"\nkey = "sk-x"'
            },
            "extra fields found (key) @ $.providers['alpha']",
        ),
        (
            {"pool": 'targets = [{provider = "gamma", model = "m"}]'},
            "names no provider of [providers], got 'gamma' @ $.pool.targets[0].provider",
        ),
        ({"pool": "targets = []"}, "must list at least one target @ $.pool.targets"),
        (
            {"pool": 'targets = [{provider = "alpha", model = ""}]'},
            "must be a non-empty string, got '' @ $.pool.targets[0].model",
        ),
        (
            {"pool": 'targets = [{provider = "alpha", model = "m"}]\nhedge_after = -2'},
            "must be a finite number of seconds > 0, got -2 @ $.pool.hedge_after",
        ),
        ({"pool": ""}, "required field missing @ $.pool"),
    ],
)
def test_each_problem_is_named_by_its_path(sections: dict[str, str], problem: str) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] invalid deployment: ") as caught:
        load_deployment(config(**sections), environ=ENV)
    problems = caught.value.message.removeprefix("invalid deployment: ").split("; ")
    assert problem in problems, caught.value.message


def test_every_problem_at_once_and_no_secret_in_them() -> None:
    text = config(
        daemon="grace = -1",
        alpha='kind = "grpc"\nbase_url = "http://u"\napi_key_env = "ALPHA_KEY"',
        pool='targets = [{provider = "gamma", model = "m"}]',
    )
    with pytest.raises(ActorError) as caught:
        load_deployment(text, environ=ENV)
    problems = caught.value.message.removeprefix("invalid deployment: ").split("; ")
    assert len(problems) == 2  # the cross-section rules wait for sound sections
    for secret in ENV.values():
        assert secret not in caught.value.message
    deployment = load_deployment(config(), environ=ENV)
    assert "sk-alpha" not in repr(deployment) and "sk-alpha" not in repr(deployment.spec())


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("[daemon\ngrace = 1", "not valid TOML"),
        (["not", "a table"], "expected a table, got ['not', 'a table']"),
        (
            {"environ": {}, "providers": {}, "pool": {"targets": []}},
            "extra fields found (environ) @ $",
        ),
    ],
)
def test_what_is_not_a_deployment(data: Any, problem: str) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] invalid deployment: ") as caught:
        load_deployment(data, environ=ENV)
    assert problem in caught.value.message


def test_a_postgresql_journal_comes_from_its_variable(postgres_dsn: str) -> None:
    deployment = load_deployment(
        config(journal='dsn_env = "JOURNAL_DSN"\nlease_ttl = 5'),
        environ={**ENV, "JOURNAL_DSN": postgres_dsn},
    )
    store = deployment.journal_store()
    try:
        assert type(store).__name__ == "PostgresStore"
        assert deployment.journal.lease_ttl == 5.0
    finally:
        store.close()


def test_an_empty_providers_table_is_refused() -> None:
    data = {"providers": {}, "pool": {"targets": [{"provider": "alpha", "model": "m"}]}}
    with pytest.raises(ActorError) as caught:
        load_deployment(data, environ=ENV)
    assert caught.value.message == (
        "invalid deployment: must name at least one provider @ $.providers; names no"
        " provider of [providers], got 'alpha' @ $.pool.targets[0].provider"
    )


async def test_the_pool_gets_the_options_and_no_limiter_without_limits(
    autojump_clock: Any,
) -> None:
    text = config(
        alpha='kind = "openai"\nbase_url = "http://u"\napi_key_env = "ALPHA_KEY"',
        pool='targets = [{provider = "alpha", model = "a-1"}]\nhedge_after = 0.5',
    )
    deployment = load_deployment(text, environ=ENV)
    assert deployment.providers["alpha"].requests_per_minute is None
    async with open_tree(deployment.spec()) as tree:
        pool = deployment.provider_pool(tree, name="mine", deadline=3.0)
        assert (pool.name, pool.hedge_after, pool.deadline) == ("mine", 0.5, 3.0)
        assert pool.resilience.limiter is None  # no provider has a rate limit
        assert [(t.provider, t.model) for t in pool.chain] == [("alpha", "a-1")]


@pytest.mark.parametrize(
    ("sections", "problem"),
    [
        ({"daemon": "metrics_port = 65536"}, "must be a port number from 0 to 65535, got 65536"),
        ({"daemon": "metrics_port = -1"}, "must be a port number from 0 to 65535, got -1"),
        ({"daemon": "grace = true"}, "must be a finite number of seconds >= 0, got True"),
        ({"daemon": 'grace = "5"'}, "must be a finite number of seconds >= 0, got '5'"),
        ({"daemon": "grace = inf"}, "must be a finite number of seconds >= 0, got inf"),
    ],
)
def test_the_boundaries_that_are_refused(sections: dict[str, str], problem: str) -> None:
    with pytest.raises(ActorError) as caught:
        load_deployment(config(**sections), environ=ENV)
    field = "metrics_port" if "port" in problem else "grace"
    assert caught.value.message == f"invalid deployment: {problem} @ $.daemon.{field}"


def test_the_boundaries_that_are_allowed() -> None:
    deployment = load_deployment(
        config(daemon="grace = 0\nmetrics_port = 65535", journal="lease_ttl = 0.001"),
        environ=ENV,
    )
    assert (deployment.daemon.grace, deployment.daemon.metrics_port) == (0.0, 65535)
    assert deployment.journal.lease_ttl == 0.001
    assert isinstance(deployment.daemon.grace, float)


def test_a_secret_pasted_in_place_of_its_variable_is_refused_and_never_shown() -> None:
    text = config(
        alpha='kind = "openai"\nbase_url = "http://u"\napi_key_env = "gsk_LIVEKEYabcdef1234567890!"',
        journal='dsn_env = "postgresql://app:hunter2pw@db.internal/runs"',
    )
    with pytest.raises(ActorError) as caught:
        load_deployment(text, environ=ENV)
    message = caught.value.message
    assert "LIVEKEY" not in message and "hunter2pw" not in message
    problem = (
        "must be the name of an environment variable (letters, digits, _), not its value"
        " (not shown)"
    )
    assert message == (
        f"invalid deployment: {problem} @ $.providers['alpha'].api_key_env;"
        f" {problem} @ $.journal.dsn_env"
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ('pool = "x"', "must be a table, got 'x' @ $.pool"),
        ('daemon = "x"', "must be a table, got 'x' @ $.daemon"),
        ("providers = {alpha = 3}", "must be a table, got 3 @ $.providers['alpha']"),
        (
            '[pool]\ntargets = "alpha"',
            "must be a list of {provider, model} tables, got 'alpha' @ $.pool.targets",
        ),
        ("x = " + "[" * 2000 + "]" * 2000, "not valid TOML: RecursionError"),
    ],
)
def test_the_wrong_shape_is_named_plainly(data: str, problem: str) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] invalid deployment: ") as caught:
        load_deployment(data, environ=ENV)
    assert problem in caught.value.message


def test_a_provider_named_like_a_child_of_the_tree_is_refused() -> None:
    text = config(
        tree='[[tree.children]]\nid = "alpha"\nactor = "tests.test_tree_introspection:Idle"'
    )
    with pytest.raises(ActorError) as caught:
        load_deployment(text, environ=ENV)
    assert "is the id of a child of [tree] already, got 'alpha' @ $.providers['alpha']" in (
        caught.value.message
    )


@pytest.mark.parametrize("environ", ["notamap", {"A": None}, {1: "x"}])
def test_a_bad_environ_is_input_validation(environ: Any) -> None:
    with pytest.raises(
        ActorError,
        match=r"^\[input_validation\] load_deployment: environ must map names to strings$",
    ):
        load_deployment(config(), environ=environ)


def test_without_environ_the_process_environment_is_read_when_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ALPHA_KEY", "sk-first")
    monkeypatch.setenv("BETA_KEY", "sk-beta")
    deployment = load_deployment(config())
    assert deployment.environ is None  # no copy of the environment is kept
    alpha = deployment.provider_config("alpha")
    assert alpha.resolve_api_key() == "sk-first"
    monkeypatch.setenv("ALPHA_KEY", "sk-rotated")
    assert alpha.resolve_api_key() == "sk-rotated"


def test_a_number_too_large_for_a_float_is_named_not_an_unknown_error() -> None:
    data = {
        "providers": {
            "alpha": {
                "kind": "openai",
                "base_url": "http://u",
                "api_key_env": "ALPHA_KEY",
                "read_timeout": 10**400,
            }
        },
        "pool": {"targets": [{"provider": "alpha", "model": "m"}]},
    }
    with pytest.raises(ActorError) as caught:
        load_deployment(data, environ=ENV)
    assert caught.value.message == (
        "invalid deployment: must be a finite number of seconds > 0, got an integer of 1329"
        " bits @ $.providers['alpha'].read_timeout"
    )
