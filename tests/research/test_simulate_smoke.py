from reinforce_ada.research.simulate import pass_rates_from, simulate


def test_simulator_runs_every_strategy():
    results = simulate(pass_rates_from("beta:0.4,2", 300), batch_size=100)
    assert [r.strategy for r in results] == ["grpo-n4", "ada-positive", "ada-balanced", "dapo"]
    by_name = {r.strategy: r for r in results}
    assert by_name["grpo-n4"].samples_per_prompt == 4.0
    assert by_name["ada-balanced"].signal_fraction > by_name["grpo-n4"].signal_fraction
