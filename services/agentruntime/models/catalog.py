"""The deployment's models: a models file (TOML) naming providers and models.

    default = "deepseek-chat"          # optional: the first model otherwise

    [providers.deepseek]
    base_url = "https://api.deepseek.com"
    api_key_env = "DEEPSEEK_API_KEY"   # the key's environment variable, if any
    # kind = "openai-compatible"       # the default; "builtin" for the built-in model

    [models.deepseek-chat]
    provider = "deepseek"
    id = "deepseek-chat"               # the provider's model id (default: the name)
    context_window = 128000            # tokens
    max_output_tokens = 8192
    # images = true                    # the model takes images (tools' images are sent)
    [models.deepseek-chat.prices]      # optional, USD per million tokens
    input = 0.27
    cached_input = 0.07                # optional: input's price when absent
    output = 1.10

The file is `--models-file` / AGENTHOST_MODELS_FILE, else `models.toml` in
the data folder if there is one. Without a file the catalog holds one model,
the one today's environment variables choose (models/factory.py): the
OpenAI-compatible model AGENTHOST_MODEL at AGENTHOST_MODEL_BASE_URL, or the
built-in model, named "builtin" (AGENTHOST_MODEL_IMAGES=1 says the
environment's model takes images; a file's model says so with `images`). A
provider named "builtin" is always known, so a file may list the built-in
model next to real ones (scripted by the provider's `script`, else
AGENTHOST_BUILTIN_SCRIPT).

A session names its model in its settings (empty: the default). Adapters are
made when a model is first used, one per model, and closed with the catalog;
the time limits of AGENTHOST_MODEL_* apply to every OpenAI-compatible model.
"""

from __future__ import annotations

import logging
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.errors import UnknownModel

from .base import ModelAdapter
from .builtin import BuiltinAdapter, load_script
from .factory import ENV_BUILTIN_SCRIPT, adapter_from_env
from .openai_compat import (
    ENV_BASE_URL,
    ENV_MODEL,
    OPENAI_COMPAT_NAME,
    OpenAICompatAdapter,
    OpenAICompatConfig,
    limits_from_env,
)

log = logging.getLogger("agenthost.runtime")

ENV_MODELS_FILE = "AGENTHOST_MODELS_FILE"
MODELS_FILE_NAME = "models.toml"
BUILTIN = "builtin"
PROVIDER_KINDS = (OPENAI_COMPAT_NAME, BUILTIN)
# A model's window and answer size when nothing configures them.
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_OUTPUT_TOKENS = 8192
BUILTIN_CONTEXT_WINDOW = 32_000
BUILTIN_MAX_OUTPUT_TOKENS = 4096
MAX_NAME_LENGTH = 256  # SessionSettings.model's bound
PER_MILLION = 1_000_000

_TOP_KEYS = {"default", "providers", "models"}
_PROVIDER_KEYS = {"kind", "base_url", "api_key_env", "script"}
_MODEL_KEYS = {"provider", "id", "context_window", "max_output_tokens", "prices", "images"}
_PRICE_KEYS = {"input", "cached_input", "output"}


class ModelsFileError(ValueError):
    """A models file that cannot be used; the message names the file and key."""

    def __init__(self, path: Path | str, key: str, problem: str) -> None:
        where = f"{path}: {key}" if key else str(path)
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Prices:
    """USD per million tokens; cached input costs `input` when not given."""

    input: float
    output: float
    cached_input: float | None = None


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    kind: str = OPENAI_COMPAT_NAME
    base_url: str = ""
    # The environment variable holding the API key ("" for none).
    api_key_env: str = ""
    # The built-in model's script (JSON, see builtin.load_script).
    script: str = ""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    provider: ProviderSpec
    # The provider's model id, sent with each request.
    model_id: str
    context_window: int
    max_output_tokens: int
    prices: Prices | None = None
    # Whether the model takes images (tool results' images are then sent).
    images: bool = False


def cost_of(
    spec: ModelSpec, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0
) -> float | None:
    """What one request cost at the model's prices (None: it has none).
    `cached_prompt_tokens` is the part of `prompt_tokens` served from cache."""
    prices = spec.prices
    if prices is None:
        return None
    cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
    cached_price = prices.input if prices.cached_input is None else prices.cached_input
    total = (
        (prompt_tokens - cached) * prices.input
        + cached * cached_price
        + completion_tokens * prices.output
    )
    return total / PER_MILLION


def price(spec: ModelSpec, usage: ev.ModelUsage) -> ev.ModelUsage:
    """`usage` with its cost at the model's prices (left absent without prices)."""
    cost = cost_of(spec, usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens)
    if cost is not None:
        usage.cost = cost
    return usage


class ModelCatalog:
    """The configured models, by name; one lazily made adapter per model."""

    def __init__(
        self,
        specs: Sequence[ModelSpec],
        default: str = "",
        *,
        adapters: Mapping[str, ModelAdapter] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not specs:
            raise ValueError("a model catalog needs at least one model")
        self._specs = {spec.name: spec for spec in specs}
        if len(self._specs) != len(specs):
            raise ValueError("model names must be unique")
        self._default = default or specs[0].name
        if self._default not in self._specs:
            raise UnknownModel(self._default, list(self._specs))
        # Adapters given up front (tests, a deployment's own) are used as they are.
        self._adapters: dict[str, ModelAdapter] = dict(adapters or {})
        self._env = os.environ if env is None else env

    @classmethod
    def of_adapter(cls, adapter: ModelAdapter, name: str = "") -> ModelCatalog:
        """One model: an adapter made elsewhere (tests, the environment's)."""
        spec = spec_of_adapter(adapter, name)
        return cls([spec], adapters={spec.name: adapter})

    def specs(self) -> list[ModelSpec]:
        return list(self._specs.values())

    def names(self) -> list[str]:
        return list(self._specs)

    @property
    def default(self) -> ModelSpec:
        return self._specs[self._default]

    def get(self, name: str) -> ModelSpec:
        """The model called `name` ("" is the default); UnknownModel if none is."""
        if not name:
            return self.default
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownModel(name, self.names())
        return spec

    def resolve(self, name: str) -> ModelSpec:
        """The model a session set, or the default when the models file no
        longer lists it (it changed since the session chose it)."""
        try:
            return self.get(name)
        except UnknownModel:
            log.warning("model %r is no longer configured: using %r", name, self._default)
            return self.default

    def adapter(self, spec: ModelSpec) -> ModelAdapter:
        adapter = self._adapters.get(spec.name)
        if adapter is None:
            adapter = self._adapters[spec.name] = build_adapter(spec, self._env)
        return adapter

    async def aclose(self) -> None:
        adapters = list(self._adapters.values())
        self._adapters.clear()
        for adapter in adapters:
            await adapter.aclose()


def spec_of_adapter(adapter: ModelAdapter, name: str = "") -> ModelSpec:
    """The spec of a ready adapter, with the adapter's window."""
    builtin = adapter.name == BUILTIN
    images = getattr(getattr(adapter, "config", None), "images", False)
    return ModelSpec(
        name=name or (BUILTIN if builtin else adapter.model),
        provider=ProviderSpec(BUILTIN if builtin else adapter.name, adapter.name),
        model_id=adapter.model,
        context_window=adapter.context_window,
        max_output_tokens=adapter.max_output_tokens,
        images=images is True,
    )


def build_adapter(spec: ModelSpec, env: Mapping[str, str]) -> ModelAdapter:
    """The adapter of a models-file model: it reports the file's window, the
    one ListModels shows."""
    provider = spec.provider
    if provider.kind == BUILTIN:
        script = provider.script or env.get(ENV_BUILTIN_SCRIPT, "")
        return BuiltinAdapter(
            load_script(script) if script else (),
            model=spec.model_id,
            context_window=spec.context_window,
            max_output_tokens=spec.max_output_tokens,
        )
    # The file's window wins over AGENTHOST_MODEL_CONTEXT_WINDOW's.
    window = {"context_window": spec.context_window, "max_output_tokens": spec.max_output_tokens}
    key = env.get(provider.api_key_env) if provider.api_key_env else None
    config = OpenAICompatConfig(
        base_url=provider.base_url,
        model=spec.model_id,
        api_key=key or None,
        images=spec.images,
        **{**limits_from_env(env), **window},
    )
    return OpenAICompatAdapter(config)


# -- where the catalog comes from --------------------------------------------------


def models_file(
    env: Mapping[str, str], data_dir: Path | None, given: Path | None = None
) -> Path | None:
    """The models file to read: the one given, AGENTHOST_MODELS_FILE, else
    `models.toml` in the data folder if present."""
    if given is not None:
        return given
    named = env.get(ENV_MODELS_FILE, "").strip()
    if named:
        return Path(named)
    if data_dir is not None and (data_dir / MODELS_FILE_NAME).is_file():
        return data_dir / MODELS_FILE_NAME
    return None


def catalog_from_env(
    env: Mapping[str, str] | None = None,
    data_dir: Path | None = None,
    models_path: Path | None = None,
) -> ModelCatalog:
    """The models file's catalog, or the one model the environment chooses."""
    env = os.environ if env is None else env
    path = models_file(env, data_dir, models_path)
    if path is not None:
        return load_catalog(path, env)
    adapter = adapter_from_env(env)
    if env.get(ENV_BASE_URL):
        return ModelCatalog.of_adapter(adapter, env.get(ENV_MODEL, ""))
    return ModelCatalog.of_adapter(adapter, BUILTIN)


def load_catalog(path: Path, env: Mapping[str, str] | None = None) -> ModelCatalog:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ModelsFileError(path, "", f"cannot be read ({error.strerror or error})") from error
    except tomllib.TOMLDecodeError as error:
        raise ModelsFileError(path, "", f"is not valid TOML ({error})") from error
    default, specs = parse_models(data, path)
    return ModelCatalog(specs, default, env=env)


def parse_models(data: Mapping[str, Any], path: Path | str) -> tuple[str, list[ModelSpec]]:
    """The default's name and the models of a parsed models file."""
    _check_keys(data, _TOP_KEYS, path, "")
    providers = {BUILTIN: ProviderSpec(BUILTIN, BUILTIN)}
    declared = _table(data, "providers", path, "")
    for name in declared:
        providers[name] = _provider(name, _table(declared, name, path, "providers"), path)
    models = _table(data, "models", path, "")
    if not models:
        raise ModelsFileError(path, "models", "lists no model")
    specs = [_model(name, _table(models, name, path, "models"), providers, path) for name in models]
    default = data.get("default", "")
    if not isinstance(default, str) or (default and default not in models):
        raise ModelsFileError(
            path, "default", f"names no model listed under [models] ({default!r})"
        )
    return default, specs


def _provider(name: str, table: Mapping[str, Any], path: Path | str) -> ProviderSpec:
    key = f"providers.{name}"
    _check_keys(table, _PROVIDER_KEYS, path, key)
    kind = _string(table, "kind", path, key, OPENAI_COMPAT_NAME)
    if kind not in PROVIDER_KINDS:
        raise ModelsFileError(path, f"{key}.kind", f"is one of {', '.join(PROVIDER_KINDS)}")
    base_url = _string(table, "base_url", path, key, "")
    if kind == OPENAI_COMPAT_NAME and not base_url.startswith(("http://", "https://")):
        raise ModelsFileError(path, f"{key}.base_url", "is required: an http(s) URL")
    return ProviderSpec(
        name,
        kind,
        base_url,
        _string(table, "api_key_env", path, key, ""),
        _string(table, "script", path, key, ""),
    )


def _model(
    name: str, table: Mapping[str, Any], providers: Mapping[str, ProviderSpec], path: Path | str
) -> ModelSpec:
    key = f"models.{name}"
    if not name or len(name) > MAX_NAME_LENGTH:
        raise ModelsFileError(path, key, f"a model's name has 1 to {MAX_NAME_LENGTH} characters")
    _check_keys(table, _MODEL_KEYS, path, key)
    provider_name = _string(table, "provider", path, key, "")
    provider = providers.get(provider_name)
    if provider is None:
        raise ModelsFileError(
            path, f"{key}.provider", f"names no provider under [providers] ({provider_name!r})"
        )
    builtin = provider.kind == BUILTIN
    window = _count(table, "context_window", path, key, BUILTIN_CONTEXT_WINDOW if builtin else None)
    room = _count(
        table, "max_output_tokens", path, key, min(DEFAULT_MAX_OUTPUT_TOKENS, window // 2)
    )
    if room >= window:
        raise ModelsFileError(path, f"{key}.max_output_tokens", "must be below context_window")
    prices = _prices(table["prices"], path, f"{key}.prices") if "prices" in table else None
    default_id = "builtin-echo" if builtin else name
    images = table.get("images", False)
    if not isinstance(images, bool):
        raise ModelsFileError(path, f"{key}.images", "is true or false")
    model_id = _string(table, "id", path, key, default_id)
    return ModelSpec(name, provider, model_id, window, room, prices, images)


def _prices(table: object, path: Path | str, key: str) -> Prices:
    if not isinstance(table, dict):
        raise ModelsFileError(path, key, "is a table of prices per million tokens")
    _check_keys(table, _PRICE_KEYS, path, key)
    for required in ("input", "output"):
        if required not in table:
            raise ModelsFileError(path, f"{key}.{required}", "is required")
    cached = _price(table, "cached_input", path, key) if "cached_input" in table else None
    return Prices(_price(table, "input", path, key), _price(table, "output", path, key), cached)


def _price(table: Mapping[str, Any], name: str, path: Path | str, key: str) -> float:
    value = table[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModelsFileError(path, f"{key}.{name}", "is a number (USD per million tokens)")
    if not math.isfinite(value) or value < 0:
        raise ModelsFileError(path, f"{key}.{name}", "is a price of 0 or more")
    return float(value)


def _table(data: Mapping[str, Any], name: str, path: Path | str, parent: str) -> dict[str, Any]:
    value = data.get(name, {})
    key = f"{parent}.{name}" if parent else name
    if not isinstance(value, dict):
        raise ModelsFileError(path, key, "is a table")
    return value


def _string(table: Mapping[str, Any], name: str, path: Path | str, key: str, default: str) -> str:
    value = table.get(name, default)
    if not isinstance(value, str) or (name != "api_key_env" and name in table and not value):
        raise ModelsFileError(path, f"{key}.{name}", "is a non-empty string")
    return value


def _count(
    table: Mapping[str, Any], name: str, path: Path | str, key: str, default: int | None
) -> int:
    if name not in table:
        if default is None:
            raise ModelsFileError(path, f"{key}.{name}", "is required (tokens)")
        return default
    value = table[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelsFileError(path, f"{key}.{name}", "is a whole number of tokens, at least 1")
    return value


def _check_keys(table: Mapping[str, Any], known: set[str], path: Path | str, key: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        where = f"{key}.{unknown[0]}" if key else unknown[0]
        raise ModelsFileError(
            path, where, f"is not a known key (known: {', '.join(sorted(known))})"
        )


# -- the model a stack uses by default ------------------------------------------------


@dataclass(frozen=True)
class ModelInUse:
    """The model a stack's turns call by default and the server that answers,
    as a person is told them (the banner of `agenthost up`)."""

    name: str
    server: str


def model_in_use(
    env: Mapping[str, str] | None = None, *, builtin_script: str | Path | None = None
) -> ModelInUse:
    """The default model turns call, named: the models file's default when
    AGENTHOST_MODELS_FILE names one, else what `adapter_from_env` would
    choose. It never fails (a missing variable or a bad file is said, and
    the runtime reports it when it builds the model)."""
    env = os.environ if env is None else env
    if env.get(ENV_MODELS_FILE, "").strip():
        return _models_file_default(Path(env[ENV_MODELS_FILE].strip()), env)
    base_url = env.get(ENV_BASE_URL, "")
    if base_url:
        return ModelInUse(env.get(ENV_MODEL, "") or f"? ({ENV_MODEL} is not set)", base_url)
    script = builtin_script or env.get(ENV_BUILTIN_SCRIPT)
    if script:
        return ModelInUse("built-in", f"none: replies scripted by {script}")
    return ModelInUse("built-in", f"none: it echoes (set {ENV_BASE_URL} and {ENV_MODEL})")


def _models_file_default(path: Path, env: Mapping[str, str]) -> ModelInUse:
    try:
        spec = load_catalog(path, env).default
    except ModelsFileError as error:
        return ModelInUse("?", f"none: {error}")
    if spec.provider.kind == BUILTIN:
        script = spec.provider.script or env.get(ENV_BUILTIN_SCRIPT)
        echo = f"replies scripted by {script}" if script else "it echoes"
        return ModelInUse(spec.name, f"none: {echo} (from {path})")
    return ModelInUse(spec.name, spec.provider.base_url)
