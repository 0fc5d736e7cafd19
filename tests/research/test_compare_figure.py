"""report.png's panels: whole-round ticks under the bars of prompts still active, and the entropy panel's "start"
labels inside their axes."""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


@pytest.mark.parametrize("rounds", [[1], [1, 2], list(range(1, 33))])
def test_the_active_panel_ticks_whole_rounds(rounds):
    import matplotlib.pyplot as plt

    from reinforce_ada.plotting import active_panel

    fig, ax = plt.subplots()
    active_panel(ax, [("grpo", "C0", {k: 1.0 / k for k in rounds}), ("ada-est", "C1", {k: 0.5 / k for k in rounds})])
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels and all(label.isdigit() for label in labels) and labels[0] == "1" and len(labels) <= 11
    assert [int(label) for label in labels] == sorted({int(label) for label in labels})
    plt.close(fig)


def test_the_entropy_panels_start_labels_stay_inside_the_axes():
    import matplotlib.pyplot as plt

    from reinforce_ada.research.compare.figure import _entropy_panel

    # each path starts at an edge of the data: highest entropy and lowest, at the top and the bottom
    report = {"strategies": {
        "grpo": {"breakdown": {"entropy": {"path": [[0, 2.0, 0.9], [1, 1.5, 0.5], [2, 1.0, 0.2]]}}},
        "ada-est": {"breakdown": {"entropy": {"path": [[0, 1.0, 0.2], [1, 1.5, 0.5], [2, 2.0, 0.9]]}}}}}
    fig, ax = plt.subplots(figsize=(4, 3))
    _entropy_panel(ax, report, {"grpo": "C0", "ada-est": "C1"})
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    starts = [t for t in ax.texts if t.get_text() == "start"]
    assert len(starts) == 2
    for text in starts:
        extent = text.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1
    plt.close(fig)
