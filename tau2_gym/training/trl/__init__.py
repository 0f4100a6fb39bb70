"""GRPO on tau2 environments with TRL (tested with trl 1.16, transformers 5.24).

Two ways in:

1. ``rollout_func`` (recommended): :func:`make_rollout_func` returns a function for
   ``GRPOTrainer(rollout_func=...)``. Each received prompt names a task (:func:`build_dataset` makes such
   prompts: :func:`task_prompt`); TRL has already repeated every prompt ``num_generations`` times, so the
   function plays one episode per prompt -- all of them in lockstep, batched generation -- with
   :class:`~tau2_gym.training.hf.policy.PolicyRunner` and returns, per episode, ``prompt_ids``, ``completion_ids``
   (policy tokens interleaved with the env/user turns' template tokens), ``logprobs``, ``env_mask``
   (1 = policy token; TRL masks the rest out of the loss) and the extra fields ``tau2_reward``,
   ``upstream_reward``, ``tau2_masked``, ``reward_info``, ``termination_reason``, ``task_id`` and ``split``,
   which TRL forwards to reward functions -- :func:`tau2_reward` reads the first. The rollouts of one prompt
   share one reset seed (``group_seed=True``), hence one user-simulator seed: as in TRL's own groups (one
   prompt, G samples), the group differs only by what the policy sampled. Honest signals: an episode
   that failed for infrastructure reasons (``user_error``, ``infrastructure_error``, a failed evaluation such
   as an NL judge error) is masked out of the gradient (reward ``None``, the TRL convention, and an all-zero
   ``env_mask``), counted and logged, never trained on as a policy failure; a malformed tool call is the
   policy's (``agent_error``, reward 0, trained on). Split guard: prompts must name tasks of the training
   split (``train`` by default; ``test`` tasks only with ``allow_test_split=True``). The model sees the exact tau2
   conversation: the domain's tool
   schemas, the customer's messages as ``user`` turns, tool results as ``tool`` turns.
   Generation uses the trainer's model (``model.generate`` with the trainer's sampling settings) or,
   with ``use_vllm=True``, TRL's vLLM backend (server or colocate mode), one batched request per turn.

2. ``environment_factory``: :func:`make_environment_factory` adapts a tau2 env to TRL's built-in tool loop.
   TRL only continues a rollout while the model calls tools, so the customer is exposed as a tool too:
   ``send_message_to_user(message)`` sends a text to the customer and returns the customer's reply as the
   tool result. The chat changes accordingly: every agent text becomes a tool call, customer replies
   arrive as ``tool`` messages, an answer without tool calls ends the rollout (an unfinished episode
   scores 0.0), several calls in one message run one after another (tau2 records them as separate agent
   turns), and the tool schemas are the ones TRL derives from Python signatures (nested object types
   appear as plain ``object``/``array``). Solo mode has no customer, so no such tool: ``done`` ends the
   episode. Use :func:`build_dataset` with ``environment=True``.

3. ``AsyncGRPOTrainer`` (TRL's asynchronous GRPO, ``trl.experimental.async_grpo``): :class:`Tau2RolloutWorker`
   (:mod:`tau2_gym.training.trl.async_worker`) is its rollout worker -- groups of episodes played against the
   trainer's vLLM server, the server's token ids and logprobs, per-group advantages, a staleness bound.

Multi-process training: episodes run per process; the vLLM backend pads every turn's batch to the same
size on all processes, so the collective calls line up. With local generation, DeepSpeed ZeRO-3 needs
``ds3_gather_for_generation=True`` (the default), since processes run different numbers of forward passes.
"""

from tau2_gym.training.trl.async_worker import AsyncRolloutConfig, Tau2RolloutWorker
from tau2_gym.training.trl.dataset import build_dataset, opening_messages, parse_task_prompt, task_prompt
from tau2_gym.training.trl.generators import TRLLocalGenerator, TRLVLLMGenerator
from tau2_gym.training.trl.rewards import INFRASTRUCTURE_REASONS, masked_reason, rollout_output, tau2_reward
from tau2_gym.training.trl.rollout import Tau2Rollout, Tau2RolloutConfig, make_rollout_func
from tau2_gym.training.trl.tool_env import SEND_MESSAGE_TOOL, Tau2ToolEnv, make_environment_factory

__all__ = [
    "build_dataset",
    "task_prompt",
    "parse_task_prompt",
    "opening_messages",
    "make_rollout_func",
    "Tau2RolloutWorker",
    "AsyncRolloutConfig",
    "Tau2Rollout",
    "Tau2RolloutConfig",
    "tau2_reward",
    "rollout_output",
    "make_environment_factory",
    "Tau2ToolEnv",
    "TRLLocalGenerator",
    "TRLVLLMGenerator",
    "SEND_MESSAGE_TOOL",
    "masked_reason",
    "INFRASTRUCTURE_REASONS",
]
