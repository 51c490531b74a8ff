"""The other models a stage asks besides the generator (the checker, a model of the cutoff,
the critic, the probes' judge): each its own endpoint, else the generation's, with the
generation's cache and retries. Shared by the generate stage (the checks asked while composing)
and the validate stage."""

from __future__ import annotations

from pathlib import Path

from cuqa_builder.llm.settings import (
    API_TIMEOUT_S,
    LOCAL_TIMEOUT_S,
    LLMSettings,
    local_model_name,
    resolve_settings,
)
from cuqa_builder.stages.options import BuildOptions


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
