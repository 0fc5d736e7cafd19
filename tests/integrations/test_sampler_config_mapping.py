"""TRL's ``AdaGRPOConfig`` and verl's ``algorithm.reinforce_ada`` block map onto :class:`SamplerConfig`'s names:
every SamplerConfig field is reachable from each integration or excluded with a reason, and what is declared again
(TRL's dataclass fields, verl's YAML defaults) carries SamplerConfig's default and help."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from reinforce_ada.config import SamplerConfig, field_docs

SAMPLER_FIELDS = {f.name for f in fields(SamplerConfig)}


def test_every_sampler_field_reaches_verl_or_is_excluded_with_a_reason():
    pytest.importorskip("verl")  # the plugin package imports verl (CI runs this file again in its verl pass)
    from reinforce_ada.integrations.verl.config import NOT_IN_VERL, SAMPLER_KEYS

    assert set(SAMPLER_KEYS) | set(NOT_IN_VERL) == SAMPLER_FIELDS
    assert not set(SAMPLER_KEYS) & set(NOT_IN_VERL)
    assert all(reason.strip() for reason in NOT_IN_VERL.values())


def test_the_verl_yaml_defaults_are_the_sampler_config_defaults():
    pytest.importorskip("verl")  # the plugin package imports verl (CI runs this file again in its verl pass)
    import yaml

    from reinforce_ada.integrations.verl.config import CONFIG_DIR, SAMPLER_KEYS

    block = yaml.safe_load(Path(CONFIG_DIR, "reinforce_ada_trainer.yaml").read_text())["algorithm"]["reinforce_ada"]
    assert set(block) <= set(SAMPLER_KEYS)
    defaults = SamplerConfig()
    for key, value in block.items():
        assert value == getattr(defaults, key), f"algorithm.reinforce_ada.{key}={value!r} differs from SamplerConfig"


def test_every_sampler_field_reaches_trl_or_is_excluded_with_a_reason():
    pytest.importorskip("trl")
    from reinforce_ada.integrations.trl.config import NOT_IN_TRL, SAMPLER_FIELDS as TRL_FIELDS, AdaGRPOConfig

    assert set(TRL_FIELDS) | set(NOT_IN_TRL) == SAMPLER_FIELDS
    assert not set(TRL_FIELDS) & set(NOT_IN_TRL)
    assert all(reason.strip() for reason in NOT_IN_TRL.values())
    declared = AdaGRPOConfig.__dataclass_fields__
    docs = field_docs(SamplerConfig)
    for name in TRL_FIELDS:  # same name, same default, SamplerConfig's docstring as the help
        assert declared[name].default == SamplerConfig.__dataclass_fields__[name].default, name
        assert declared[name].metadata["help"].startswith(docs[name]), name


def test_trl_builds_the_sampler_config_from_its_fields(tmp_path):
    pytest.importorskip("trl")
    from reinforce_ada.integrations.trl.config import AdaGRPOConfig

    config = AdaGRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2,
                           samples_per_round=3, max_rounds=2, exit_rule="positive", min_positive=2,
                           selection="random", report_to="none", use_cpu=True)
    sampler = config.sampler_config(process_index=1)
    assert (sampler.samples_per_round, sampler.max_rounds, sampler.group_size, sampler.exit_rule,
            sampler.min_positive, sampler.selection, sampler.seed) == (3, 2, 2, "positive", 2, "random",
                                                                        config.seed + 1)
    assert (sampler.unexited, sampler.on_verifier_failure, sampler.budget_skip, sampler.epsilon) == (
        "keep", "zero", False, 1e-4)


def test_verl_refuses_est_and_the_objective_by_name():
    """The round-based sampler's block (legacy trainer) refuses Est's keys with where they run instead (Est on the v1
    trainer, tests/integrations/test_verl_v1_est.py); so is every other excluded key (not an 'unknown key')."""
    pytest.importorskip("verl")
    from reinforce_ada.config import ConfigError
    from reinforce_ada.integrations.verl.config import sampler_settings

    with pytest.raises(ConfigError, match=r"reinforce_ada\.mode is not taken .*reinforce_ada_est and trainer\.use_v1"):
        sampler_settings({"reinforce_ada": {"mode": "est"}})
    with pytest.raises(ConfigError, match=r"reinforce_ada\.objective is not taken .*Est on the v1 trainer"):
        sampler_settings({"reinforce_ada": {"objective": "log"}})
    with pytest.raises(ConfigError, match=r"reinforce_ada\.est is not taken"):
        sampler_settings({"reinforce_ada": {"est": {"decay": 0.5}}})


def test_trl_takes_est_and_the_objective_under_the_standalone_names(tmp_path):
    """mode='est' with est_<name> for sampler.est.<name> and memory_seed for sampler.memory.seed; the objective family
    for Est and for Seq's explicit weight."""
    pytest.importorskip("trl")
    from reinforce_ada.config import EstConfig
    from reinforce_ada.integrations.trl.config import EST_FIELDS, AdaGRPOConfig

    declared = AdaGRPOConfig.__dataclass_fields__
    for name in EstConfig.__dataclass_fields__:  # same default, the standalone help
        assert f"est_{name}" in EST_FIELDS, name
        if name != "samples_per_prompt":  # None: it follows num_generations (TRL's rows per prompt)
            assert declared[f"est_{name}"].default == EstConfig().__dict__[name], name
    common = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    est = AdaGRPOConfig(mode="est", num_generations=8, per_device_train_batch_size=8, est_decay=0.5,
                        est_prior_beta=16.0, est_max_samples=12, objective="power:0.5", sample_share=0.25,
                        **common).sampler_config()
    assert (est.mode, est.est.decay, est.est.prior_beta, est.est.max_samples, est.objective_in_use,
            est.sample_share_in_use) == ("est", 0.5, 16.0, 12, "power:0.5", 0.25)
    seq = AdaGRPOConfig(objective="log", num_generations=2, per_device_train_batch_size=2, **common).sampler_config()
    assert seq.mode == "rounds" and seq.weights_gradient
    assert AdaGRPOConfig(objective="linear", num_generations=2, per_device_train_batch_size=2,
                         **common).sampler_config().objective_in_use == "linear"
