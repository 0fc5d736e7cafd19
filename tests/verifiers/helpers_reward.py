"""A TRL-style reward function importable as 'helpers_reward:...' from the tests (pytest puts this folder on sys.path)."""


def length_matches(prompts, completions, answer, **kwargs):
    return [float(len(str(c)) == len(str(a))) for c, a in zip(completions, answer)]


NOT_CALLABLE = 3
