import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

# The test models are tiny: one thread is as fast as two, and far faster when the cores are shared.
torch.set_num_threads(1)
