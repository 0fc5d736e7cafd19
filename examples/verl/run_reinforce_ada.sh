#!/usr/bin/env bash
# Reinforce-Ada-balance on verl >= 0.9 through the reinforce-ada plugin (no fork): the paper's 1.5B recipe
# (arXiv 2510.04996; Qwen2.5-Math-1.5B, one node of 8 GPUs, 512 prompts per step, n=4 kept of at most M*N=8*4 drawn,
# PPO-clip 0.2/0.28 with token-mean loss, lr 1e-6, no KL).
#
#   pip install 'reinforce-ada[verl]' vllm          # see docs/verl.md for versions
#   MODEL_PATH=Qwen/Qwen2.5-Math-1.5B TRAIN_FILE=data/train.parquet VAL_FILE=data/test.parquet \
#       bash examples/verl/run_reinforce_ada.sh [extra hydra overrides...]
#
# TRAIN_FILE / VAL_FILE are verl-format parquet files (a chat "prompt" column, "data_source", and
# "reward_model": {"ground_truth": ...}; verl's examples/data_preprocess scripts write them). Any extra argument is
# passed to hydra, e.g. `algorithm.reinforce_ada.exit_rule=positive` for Reinforce-Ada-pos, or `--cfg job` to print
# the composed config without training.
set -euo pipefail

MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-Math-1.5B}
TRAIN_FILE=${TRAIN_FILE:-data/openr1/train.parquet}
VAL_FILE=${VAL_FILE:-data/openr1/test.parquet}
NGPUS=${NGPUS:-8}
PROJECT=${PROJECT:-reinforce-ada}
EXPERIMENT=${EXPERIMENT:-reinforce_ada_balance_qwen2.5-math-1.5b}

max_prompt_length=1024
max_response_length=2048
actor_max_tokens=$(( (max_prompt_length + max_response_length) * 2 ))
infer_max_tokens=$(( (max_prompt_length + max_response_length) * 3 ))

python3 -m reinforce_ada.integrations.verl.main_ppo \
    algorithm.adv_estimator=reinforce_ada \
    algorithm.reinforce_ada.samples_per_round=8 \
    algorithm.reinforce_ada.max_rounds=4 \
    algorithm.reinforce_ada.exit_rule=balanced \
    algorithm.reinforce_ada.selection=balanced \
    algorithm.reinforce_ada.advantage=pool \
    algorithm.reinforce_ada.normalize_std=false \
    algorithm.use_kl_in_reward=false \
    actor_rollout_ref.rollout.n=4 \
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
