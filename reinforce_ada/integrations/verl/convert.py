"""DataProto <-> reinforce-ada types.

verl moves a batch as one ``DataProto``: a TensorDict of padded ``(B, ...)`` tensors plus ``non_tensor_batch`` numpy
object arrays, rows grouped into prompts by the ``uid`` column. The sampler works on :class:`Prompt`,
:class:`Completion` and :class:`Group`. This module converts between the two and nothing else:

* :func:`prompts_from_dataproto` -- one :class:`Prompt` per distinct ``uid`` (group by id, never by reshape), with the
  rows each prompt occupies.
* :func:`completions_from_dataproto` -- one :class:`VerlCompletion` per generated row; the completion remembers which
  row of the step's rollout outputs it is, so its tensors are never copied or re-tokenised.
* :func:`assemble_training_batch` -- the kept groups back into a DataProto with exactly the rows the trainer asked for,
  the reward written into ``rm_scores`` and the per-sample pool statistics into ``reward_baselines``.
* :func:`groups_from_dataproto` -- the inverse of the last step (for tests, logging and inspection).

Row layout written for the trainer (``B`` rows, the same ``uid`` at the same positions as the request):

* ``reward_baselines`` ``(B, 4)`` float64: ``[pool_mean, pool_std, pool_count, pool_num_positive]`` of the row's
  prompt (:data:`POOL_STATS_COLUMNS`). verl's
  ``compute_advantage`` passes the ``reward_baselines`` column to every registered estimator, so this is how the
  whole-pool statistics reach ``reinforce_ada``'s estimator exactly, for any real reward.
* ``rm_scores`` ``(B, T)``: the reward at the last response token (verl's convention), 0 elsewhere.
* A row that a prompt could not fill with a distinct kept completion (its group is short: ``unexited="drop"``, failed
  verifications) is a *padding row*: one of its own rows reduced to its last prompt token with an empty response
  (``attention_mask`` 1 on that token only, ``response_mask`` 0), ``rm_scores`` 0, ``pool_count`` 0 and
  ``non_tensor_batch["reinforce_ada_is_pad"] = True``. It keeps the shapes and data-parallel divisibility verl
  expects, contributes no token to any loss, costs one token where verl counts tokens, and is an *aborted* row to
  verl's ``compute_data_metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence

import numpy as np
import torch

from reinforce_ada.types import Completion, Group, Prompt, SampledBatch

UID_KEY = "uid"
POOL_STATS_KEY = "reward_baselines"
POOL_STATS_COLUMNS = ("pool_mean", "pool_std", "pool_count", "pool_num_positive")
PAD_KEY = "reinforce_ada_is_pad"
EXITED_KEY = "reinforce_ada_exited"
ROUND_KEY = "reinforce_ada_round"


@dataclass(slots=True)
class VerlCompletion(Completion):
    """A completion that is row ``rollout_row`` of the step's concatenated rollout outputs."""

    rollout_row: int = -1
    score: float | None = None
    """The reward verl's reward loop attached during generation (``rm_scores`` summed), if it did."""


def _require_dataproto(data: Any, name: str) -> None:
    from verl import DataProto

    if not isinstance(data, DataProto):
        raise TypeError(f"{name} must be a verl DataProto (got {type(data).__name__})")


def prompt_positions(data: Any, uid_key: str = UID_KEY) -> dict[Hashable, list[int]]:
    """``uid -> row positions`` in first-appearance order (rows of one prompt need not be adjacent)."""
    if uid_key not in data.non_tensor_batch:
        raise ValueError(f"the batch has no non_tensor_batch[{uid_key!r}] column: verl's trainer sets it before "
                         "generation; without it rows cannot be grouped into prompts")
    positions: dict[Hashable, list[int]] = {}
    for row, uid in enumerate(data.non_tensor_batch[uid_key].tolist()):
        positions.setdefault(uid, []).append(row)
    return positions


def _ground_truth(reward_model: Any) -> Any:
    if isinstance(reward_model, Mapping):
        return reward_model.get("ground_truth")
    return None


def prompts_from_dataproto(data: Any, uid_key: str = UID_KEY) -> tuple[list[Prompt], dict[Hashable, list[int]]]:
    """One :class:`Prompt` per distinct ``uid`` and the rows each occupies.

    ``Prompt.prompt`` is the ``raw_prompt`` column (chat messages) when present, ``Prompt.answer`` is
    ``reward_model["ground_truth"]`` when present, and ``Prompt.metadata["row"]`` is the prompt's first row, which
    is the row sent to the rollout for it.
    """
    _require_dataproto(data, "data")
    positions = prompt_positions(data, uid_key)
    non_tensor = data.non_tensor_batch
    prompts = []
    for uid, rows in positions.items():
        first = rows[0]
        text = non_tensor["raw_prompt"][first] if "raw_prompt" in non_tensor else ""
        answer = _ground_truth(non_tensor["reward_model"][first]) if "reward_model" in non_tensor else None
        metadata = {"row": first}
        if "data_source" in non_tensor:
            metadata["data_source"] = non_tensor["data_source"][first]
        prompts.append(Prompt(prompt_id=uid, prompt=text, answer=answer, metadata=metadata))
    return prompts, positions


def response_lengths(data: Any) -> torch.Tensor:
    """Valid response tokens per row: the response part of ``attention_mask`` (verl's ``compute_response_mask``)."""
    width = data.batch["responses"].shape[-1]
    return data.batch["attention_mask"][:, -width:].sum(dim=-1).long()


def prompt_lengths(data: Any) -> torch.Tensor:
    """Valid prompt tokens per row: the prompt part of ``attention_mask`` (verl's ``_compute_response_info``)."""
    width = data.batch["responses"].shape[-1]
    return data.batch["attention_mask"][:, :-width].sum(dim=-1).long()


def completions_from_dataproto(data: Any, prompt_ids: Sequence[Hashable], *, first_row: int = 0,
                               tokenizer: Any = None) -> list[VerlCompletion]:
    """One completion per row of a rollout output; row ``i`` belongs to ``prompt_ids[i]``.

    ``first_row`` is the index of ``data``'s first row in the step's concatenated outputs. ``text`` is decoded only
    when a tokenizer is given (verifiers that read text need it; verl's own reward does not).
    """
    _require_dataproto(data, "rollout output")
    if len(data) != len(prompt_ids):
        raise ValueError(f"the rollout returned {len(data)} rows for {len(prompt_ids)} requested completions")
    for key in ("responses", "attention_mask"):
        if key not in data.batch.keys():
            raise ValueError(f"the rollout output has no {key!r} tensor (got {sorted(data.batch.keys())})")
    responses = data.batch["responses"]
    lengths = response_lengths(data).tolist()
    width = responses.shape[-1]
    scores = data.batch["rm_scores"].sum(dim=-1).tolist() if "rm_scores" in data.batch.keys() else None
    logprobs = data.batch["rollout_log_probs"] if "rollout_log_probs" in data.batch.keys() else None
    completions = []
    for i, (prompt_id, length) in enumerate(zip(prompt_ids, lengths)):
        token_ids = responses[i, :length].tolist()
        completions.append(VerlCompletion(
            prompt_id=prompt_id,
            text=tokenizer.decode(token_ids, skip_special_tokens=True) if tokenizer is not None else "",
            token_ids=token_ids,
            logprobs=logprobs[i, :length].tolist() if logprobs is not None else None,
            finish_reason="length" if length >= width else "stop",
            rollout_row=first_row + i,
            score=float(scores[i]) if scores is not None else None,
        ))
    return completions


def assemble_training_batch(sampled: SampledBatch, rollout_rows: Any, positions: Mapping[Hashable, Sequence[int]],
                            fallback_rows: Mapping[Hashable, int]) -> Any:
    """The kept groups as a DataProto whose row ``p`` belongs to the prompt that held position ``p`` in the request.

    ``rollout_rows`` is the step's concatenated rollout outputs (what :attr:`VerlCompletion.rollout_row` indexes);
    ``positions`` maps each uid to the positions it must fill; ``fallback_rows`` gives, per uid, a rollout row of that
    prompt to copy into padding rows (see the module docstring). A group larger than its positions is an error.
    """
    _require_dataproto(rollout_rows, "rollout_rows")
    num_rows = sum(len(rows) for rows in positions.values())
    order = np.full(num_rows, -1, dtype=np.int64)
    rewards = np.zeros(num_rows, dtype=np.float64)
    stats = np.zeros((num_rows, len(POOL_STATS_COLUMNS)), dtype=np.float64)
    exited = np.zeros(num_rows, dtype=bool)
    rounds = np.zeros(num_rows, dtype=np.int64)
    is_pad = np.zeros(num_rows, dtype=bool)
    groups = {g.prompt_id: g for g in sampled.groups}
    for uid, rows in positions.items():
        group = groups.get(uid)
        kept = group.completions if group is not None else []
        if len(kept) > len(rows):
            raise ValueError(f"prompt {uid!r} kept {len(kept)} completions but the trainer expects {len(rows)} rows "
                             "per prompt; group_size must equal actor_rollout_ref.rollout.n")
        for position, completion in zip(rows, kept):
            if not isinstance(completion, VerlCompletion) or completion.rollout_row < 0:
                raise TypeError(f"completion of prompt {uid!r} does not point at a rollout row")
            order[position] = completion.rollout_row
            rewards[position] = completion.reward
            stats[position] = (group.pool_mean, group.pool_std, group.pool_count, group.pool_num_positive)
            exited[position] = group.exited
            rounds[position] = completion.round
        for position in rows[len(kept):]:
            if uid not in fallback_rows:
                raise ValueError(f"prompt {uid!r} has no generated row to pad its group with")
            order[position] = fallback_rows[uid]
            is_pad[position] = True
    if (order < 0).any():
        raise ValueError(f"positions do not cover rows {np.flatnonzero(order < 0).tolist()} of the batch")

    out = rollout_rows.select_idxs(order)
    pad = torch.from_numpy(is_pad)
    lengths = response_lengths(out)
    if "response_mask" in out.batch.keys():
        response_mask = out.batch["response_mask"].clone()
    else:
        width = out.batch["responses"].shape[-1]
        response_mask = out.batch["attention_mask"][:, -width:].clone()
    response_mask[pad] = 0
    out.batch["response_mask"] = response_mask
    if pad.any():
        _shrink_padding_rows(out, pad)
        lengths = response_lengths(out)
    rm_scores = torch.zeros(response_mask.shape, dtype=torch.float32)
    rows_with_tokens = torch.nonzero(lengths > 0).squeeze(-1)
    reward_tensor = torch.from_numpy(np.where(is_pad, 0.0, rewards)).to(torch.float32)
    rm_scores[rows_with_tokens, lengths[rows_with_tokens] - 1] = reward_tensor[rows_with_tokens]
    out.batch["rm_scores"] = rm_scores
    out.batch[POOL_STATS_KEY] = torch.from_numpy(stats)
    uids = np.empty(num_rows, dtype=object)
    for uid, rows in positions.items():
        for position in rows:
            uids[position] = uid
    out.non_tensor_batch[UID_KEY] = uids
    out.non_tensor_batch[PAD_KEY] = is_pad
    out.non_tensor_batch[ROUND_KEY] = rounds
    out.non_tensor_batch[EXITED_KEY] = exited
    return out


def _shrink_padding_rows(data: Any, pad: torch.Tensor) -> None:
    """Make padding rows verl's *aborted* rows of one token: the last valid prompt token, an empty response.

    Everything in verl that counts tokens reads ``attention_mask`` -- ``balance_batch``'s sequence lengths, the
    dynamic micro-batches' token budget, ``global_token_num`` (throughput) -- so a padding row then costs one token
    there instead of a whole sequence; ``compute_data_metrics`` treats an empty response as aborted and leaves the
    row out of ``critic/score``, ``critic/rewards`` and ``response_length_non_aborted``. Rows with multi-modal inputs
    keep their prompt (their image tokens must stay consistent with ``multi_modal_inputs``); only the response goes.
    """
    attention = data.batch["attention_mask"].clone()  # (B, P + T)
    width = data.batch["responses"].shape[-1]
    prompt_width = attention.shape[-1] - width
    multi_modal = data.non_tensor_batch.get("multi_modal_inputs")
    for row in torch.nonzero(pad).squeeze(-1).tolist():
        attention[row, prompt_width:] = 0
        if multi_modal is not None and multi_modal[row]:
            continue
        valid = torch.nonzero(attention[row, :prompt_width]).squeeze(-1)
        if len(valid) > 1:
            attention[row, valid[:-1]] = 0
    data.batch["attention_mask"] = attention


def groups_from_dataproto(data: Any, uid_key: str = UID_KEY) -> list[Group]:
    """The groups a training batch carries (padding rows left out), rebuilt from its columns.

    Rewards come from ``rm_scores`` (summed over tokens), pool statistics from ``reward_baselines``.
    """
    _require_dataproto(data, "data")
    if POOL_STATS_KEY not in data.batch.keys():
        raise ValueError(f"the batch has no {POOL_STATS_KEY!r} column: it was not produced by ReinforceAdaRollout")
    positions = prompt_positions(data, uid_key)
    is_pad = data.non_tensor_batch.get(PAD_KEY, np.zeros(len(data), dtype=bool))
    rewards = data.batch["rm_scores"].sum(dim=-1).tolist()
    stats = data.batch[POOL_STATS_KEY].tolist()
    lengths = response_lengths(data).tolist()
    responses = data.batch["responses"]
    rounds = data.non_tensor_batch.get(ROUND_KEY, np.zeros(len(data), dtype=np.int64))
    exited = data.non_tensor_batch.get(EXITED_KEY, np.ones(len(data), dtype=bool))
    groups = []
    for uid, rows in positions.items():
        rows = [r for r in rows if not is_pad[r]]
        if not rows:
            continue
        completions = [Completion(prompt_id=uid, text="", token_ids=responses[r, :lengths[r]].tolist(),
                                  reward=rewards[r], round=int(rounds[r])) for r in rows]
        mean, std, count, num_positive = stats[rows[0]]
        groups.append(Group(prompt=Prompt(prompt_id=uid, prompt=""), completions=completions, pool_mean=mean,
                            pool_std=std, pool_count=int(count), pool_num_positive=int(num_positive),
                            exited=bool(exited[rows[0]])))
    return groups
