#!/usr/bin/env bash
# Reinforce-Ada-Est (arXiv 2510.04996v3, Algorithm 1) on verl >= 0.9's default v1 trainer through the reinforce-ada
# plugin (no fork): GRPO-n8's budget (512 prompts x 8 samples per step, one generation call), each prompt's share
# set from its remembered pass rate (1 / sqrt(p_hat), clipped to [2, 32]), advantages (r - rbar) / sqrt(rbar + eps)
# (the log objective; weight capped at 8), Qwen2.5-Math-1.5B on one node of 8 GPUs, PPO-clip 0.2/0.28 with token-mean
# loss, lr 1e-6, no KL.
#
#   pip install 'reinforce-ada[verl]' vllm          # see docs/verl.md for versions (TransferQueue included)
#   MODEL_PATH=Qwen/Qwen2.5-Math-1.5B TRAIN_FILE=data/train.parquet VAL_FILE=data/test.parquet \
#       bash examples/verl/run_reinforce_ada_est.sh [extra hydra overrides...]
#
# TRAIN_FILE / VAL_FILE are verl-format parquet files (a chat "prompt" column, "data_source", and
# "reward_model": {"ground_truth": ...}; verl's examples/data_preprocess scripts write them). Any extra argument is
# passed to hydra, e.g. `algorithm.reinforce_ada.objective=linear` (GRPO-n8's even split and plain r - rbar),
# `+algorithm.reinforce_ada.memory.seed=pass_rates.jsonl` (a `reinforce-ada select-prompts` file), or `--cfg job` to
# print the composed config without training. Est's per-step metrics go to
# ${default_local_dir}/reinforce_ada_est_metrics.jsonl and the driver's log (docs/verl.md, "Reinforce-Ada-Est").
set -euo pipefail

MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-Math-1.5B}
TRAIN_FILE=${TRAIN_FILE:-data/openr1/train.parquet}
VAL_FILE=${VAL_FILE:-data/openr1/test.parquet}
NGPUS=${NGPUS:-8}
PROJECT=${PROJECT:-reinforce-ada}
EXPERIMENT=${EXPERIMENT:-reinforce_ada_est_qwen2.5-math-1.5b}

max_prompt_length=1024
max_response_length=2048
actor_max_tokens=$(( (max_prompt_length + max_response_length) * 2 ))
infer_max_tokens=$(( (max_prompt_length + max_response_length) * 3 ))

python3 -m reinforce_ada.integrations.verl.main_ppo --config-name reinforce_ada_est_trainer \
    algorithm.adv_estimator=reinforce_ada_est \
    algorithm.reinforce_ada.mode=est \
    algorithm.reinforce_ada.est.samples_per_prompt=8 \
    algorithm.reinforce_ada.est.min_samples=2 \
    algorithm.reinforce_ada.est.max_samples=32 \
    algorithm.reinforce_ada.est.decay=0.9 \
    algorithm.reinforce_ada.objective=log \
    algorithm.reinforce_ada.max_grad_weight=8.0 \
    algorithm.use_kl_in_reward=false \
    actor_rollout_ref.rollout.n=8 \
    trainer.use_v1=true \
    data.train_files="['${TRAIN_FILE}']" \
    data.val_files="['${VAL_FILE}']" \
    data.prompt_key=prompt \
    data.truncation=left \
    data.max_prompt_length=${max_prompt_length} \
    data.max_response_length=${max_response_length} \
    data.train_batch_size=512 \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    actor_rollout_ref.model.use_remove_padding=true \
    actor_rollout_ref.model.enable_gradient_checkpointing=true \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.optim.lr_warmup_steps=10 \
    actor_rollout_ref.actor.optim.weight_decay=0.0 \
    actor_rollout_ref.actor.ppo_mini_batch_size=128 \
    actor_rollout_ref.actor.use_dynamic_bsz=true \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=${actor_max_tokens} \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.actor.clip_ratio_low=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 \
    actor_rollout_ref.actor.clip_ratio_c=10.0 \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
    actor_rollout_ref.actor.use_kl_loss=false \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.actor.grad_clip=1.0 \
    actor_rollout_ref.actor.fsdp_config.fsdp_size=${NGPUS} \
    actor_rollout_ref.ref.log_prob_use_dynamic_bsz=true \
    actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=${infer_max_tokens} \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.8 \
    actor_rollout_ref.rollout.max_num_batched_tokens=$(( max_prompt_length + max_response_length )) \
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true \
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=${infer_max_tokens} \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.top_p=1.0 \
    actor_rollout_ref.rollout.top_k=-1 \
    actor_rollout_ref.rollout.val_kwargs.temperature=0.0 \
    actor_rollout_ref.rollout.val_kwargs.do_sample=false \
    actor_rollout_ref.rollout.val_kwargs.n=1 \
    reward.reward_manager.name=naive \
    trainer.logger='["console","wandb"]' \
    trainer.project_name="${PROJECT}" \
    trainer.experiment_name="${EXPERIMENT}" \
    trainer.n_gpus_per_node=${NGPUS} \
    trainer.nnodes=1 \
    trainer.val_before_train=true \
    trainer.test_freq=50 \
    trainer.save_freq=50 \
    trainer.total_training_steps=400 \
    "$@"
