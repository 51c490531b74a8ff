"""The other models a stage asks besides the generator (the checker, a model of the cutoff,
the critic, the probes' judge): each its own endpoint, else the generation's, with the
generation's cache and retries. Shared by the generate stage (the checks asked while composing)
and the validate stage."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from cuqa_builder.llm.settings import (
    API_TIMEOUT_S,
    LOCAL_TIMEOUT_S,
    LLMSettings,
    local_model_name,
    resolve_settings,
)
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.verification.checker import ItemChecker

if TYPE_CHECKING:
    from cuqa_builder.llm.gateway import Gateway


def _with_model(
    settings: LLMSettings, model: str, base_url: str | None, timeout_s: float | None
) -> LLMSettings:
    """The same call settings (cache, retries...) aimed at another model: `local[:NAME]` is an
    embedded model whatever the generation used; `timeout_s` is --timeout, if given."""
    if model == "local" or model.startswith("local:"):
        local = local_model_name(model)
        return settings.model_copy(update={"model": None, "base_url": None, "local": local,
                                           "timeout_s": timeout_s or LOCAL_TIMEOUT_S})
    if base_url:
        return settings.model_copy(update={"model": model, "base_url": base_url, "local": None,
                                           "timeout_s": timeout_s or API_TIMEOUT_S})
    if settings.uses_local_model:  # an embedded model is chosen by its registry name
        return settings.model_copy(update={"local": model})
    return settings.model_copy(update={"model": model})


def model_settings(
    options: BuildOptions, cache: Path, model: str, base_url: str | None
) -> LLMSettings:
    """Settings for another model (checker, probe, critic): its own endpoint, else the
    generation's, with the generation's cache and retries."""
    base = resolve_settings(options.llm, default_cache=cache)
    return _with_model(base, model, base_url, options.llm.timeout)


def probe_settings(
    options: BuildOptions, cache: Path
) -> tuple[LLMSettings, LLMSettings | None]:
    """The probe model's settings (`--probe-base-url`, else the generation endpoint) and the
    judge's, at the probe's endpoint; None without `--judge-model`."""
    checks, timeout = options.checks, options.llm.timeout
    assert checks.probe_model is not None
    probe = model_settings(options, cache, checks.probe_model, checks.probe_base_url)
    if not checks.judge_model:
        return probe, None
    return probe, _with_model(probe, checks.judge_model, None, timeout)


async def open_checker(
    options: BuildOptions, cache: Path, cutoff_label: str, model: str, stack: AsyncExitStack,
    generator: Gateway | None = None,
) -> tuple[ItemChecker, list[Gateway]]:
    """The checker (`model` at --check-base-url, else the generation's endpoint), with the
    --probe-model guessing at the whole question when given, and the distinct gateways it asks
    (for their stats). A gateway is opened once: the generator's is the checker's when they
    are the same model (so compose time and validate share their answers through the cache),
    and the checker's is the guesser's when the probe model is the checker."""
    # Imported here: `openai` takes a while to load and only asking needs it.
    from cuqa_builder.llm.gateway import open_gateway

    checks = options.checks
    settings = model_settings(options, cache, model, checks.check_base_url)
    if generator is not None and generator.model == model and not checks.check_base_url:
        client = generator
    else:
        client = await stack.enter_async_context(open_gateway(settings))
    gateways, guesser = [client], None
    if checks.probe_model:
        probe = probe_settings(options, cache)[0]
        guesser = client if probe == settings else await stack.enter_async_context(
            open_gateway(probe))
        gateways += [guesser] if guesser is not client else []
    checker = ItemChecker(client, cutoff_label, counted=checks.guesses, guesser=guesser)
    return checker, gateways
