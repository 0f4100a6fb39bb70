"""SFT export: results files -> TRL's conversational dataset, with the split and reward filters."""

from __future__ import annotations

import json

import pytest

from tau2_gym.cli import main
from tau2_gym.core.domain import load_domain
from tau2_gym.core.results_file import load_results
from tau2_gym.training.export import METADATA_COLUMNS, ExportError, export_rows


@pytest.fixture(scope="module")
def airline_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("exp") / "airline.json"
    assert (
        main(
            [
                "rollout",
                "--domain",
                "airline",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--output",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    return out


def test_split_filter_drops_every_test_task(airline_results):
    splits = load_domain("airline").splits()
    rows = export_rows([airline_results], split="train")
    assert {r["task_id"] for r in rows} == set(splits["train"])
    assert not {r["task_id"] for r in rows} & set(splits["test"])
    assert {r["split"] for r in rows} == {"train"}
    everything = export_rows([airline_results], split=None, allow_test_split=True)
    assert len(everything) == len(load_results(airline_results).simulations)
    assert {r["split"] for r in everything} == {"all"}


@pytest.mark.parametrize("split", ["test", None, "base"])  # test itself, all tasks, a split holding test tasks
def test_test_tasks_are_refused_without_the_flag(airline_results, split):
    with pytest.raises(ExportError, match="allow_test_split"):
        export_rows([airline_results], split=split)
    rows = export_rows([airline_results], split=split, allow_test_split=True)
    test = set(load_domain("airline").splits()["test"])
    assert {r["task_id"] for r in rows} & test


def test_cli_refuses_test_split_without_the_flag(tmp_path, airline_results, capsys):
    out = tmp_path / "ds"
    assert main(["export", str(airline_results), "--output", str(out), "--split", "test"]) == 2
    assert "--allow-test-split" in capsys.readouterr().err and not out.exists()
    pytest.importorskip("datasets")
    assert main(["export", str(airline_results), "--output", str(out), "--split", "test", "--allow-test-split"]) == 0
    assert "split: test" in capsys.readouterr().out


def test_domain_without_splits_exports_all_tasks_as_train(mock_results):
    rows = export_rows([mock_results])  # mock holds nothing out: the default 'train' means all of it
    assert rows and {r["split"] for r in rows} == {"all"}
    with pytest.raises(ExportError, match="no task split 'small'"):
        export_rows([mock_results], split="small")


def test_min_reward_filter(tmp_path, airline_results):
    data = json.loads(airline_results.read_text())
    kept = [s for s in data["simulations"] if s["task_id"] in load_domain("airline").splits()["train"]]
    kept[0]["reward_info"]["reward"] = 0.0
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    rows = export_rows([path], min_reward=1.0)
    assert kept[0]["task_id"] not in {r["task_id"] for r in rows}
    assert len(rows) == len(kept) - 1


def test_rows_have_system_prompt_tools_and_the_conversation(airline_results):
    rows = export_rows([airline_results])
    row = rows[0]
    loaded = load_domain("airline")
    assert row["messages"][0] == {"role": "system", "content": row["messages"][0]["content"]}
    assert loaded.policy() in row["messages"][0]["content"]
    assert [t["function"]["name"] for t in json.loads(row["tools"])] == [
        t["function"]["name"] for t in loaded.agent_tool_schemas()
    ]
    assert any(m.get("tool_calls") for r in rows for m in r["messages"])


@pytest.mark.parametrize("text", ["{not json", json.dumps({"simulations": []})])
def test_bad_results_file_is_a_clear_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ExportError, match="bad.json"):
        export_rows([path])


def test_cli_writes_a_loadable_dataset(tmp_path, airline_results, capsys):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "ds"
    assert main(["export", str(airline_results), "--output", str(out)]) == 0
    ds = datasets.load_from_disk(str(out))
    assert len(ds) == len(load_domain("airline").splits()["train"])
    assert main(["export", str(tmp_path / "missing.json"), "--output", str(out)]) == 2
    assert "missing.json" in capsys.readouterr().err


@pytest.fixture(scope="module")
def mock_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("exp") / "mock.json"
    assert (
        main(
            [
                "rollout",
                "--domain",
                "mock",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--output",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    return out


def spans(ids, mask):
    """Maximal runs of ids where mask == 1."""
    out, cur = [], []
    for t, m in zip(ids, mask):
        if m:
            cur.append(t)
        elif cur:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


@pytest.mark.parametrize("template", ["chatml", "qwen2_5", "qwen3"])
def test_tokens_format_masks_exactly_the_policy_turns_as_the_grpo_rollout_does(mock_results, template):
    """qwen3 is not prefix-preserving (it drops past <think> blocks): asked for one sequence, each turn keeps the
    empty think block the template writes into a last turn, and the context stays append-only, as in the rollout
    asked for the same (``"auto"`` makes per-turn rows there: tests/training/test_per_turn_training.py)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if template != "chatml":
        pytest.importorskip("trl")
    import gymnasium as gym
    from hfutil import ForceScript, assistant_body, oracle_scripts, tiny

    from tau2_gym.training.export import tokenize_rows
    from tau2_gym.training.hf.chat import ChatRenderer
    from tau2_gym.training.hf.generation import HFGenerator
    from tau2_gym.training.hf.policy import PolicyRunner
    from tau2_gym.training.trl import opening_messages

    model, tok = tiny(template)
    rows = export_rows([mock_results], split=None)
    tokens = tokenize_rows(rows, tok, sample_mode="sequence")
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    loaded = load_domain("mock")
    assert len(rows) == len(tokens) >= 4
    for row, tr in zip(rows, tokens):
        assert len(tr["input_ids"]) == len(tr["assistant_masks"]) and tr["task_id"] == row["task_id"]
        # the agent's view before the customer's first turn (greeting, task history) is prompt, not policy
        opening = [m for m in opening_messages(loaded, loaded.task(row["task_id"])) if m.get("content") != ""]
        assert row["messages"][: len(opening)] == opening
        policy = [m for m in row["messages"][len(opening) :] if m["role"] == "assistant"]
        got = [tok.decode(s) for s in spans(tr["input_ids"], tr["assistant_masks"])]
        think = "<think>\n\n</think>\n\n" if template == "qwen3" else ""
        assert got == [think + assistant_body(renderer, m) + "<|im_end|>" for m in policy]
        assert tok.decode(tr["input_ids"]).count("<|im_start|>assistant") == len(policy) + sum(
            m["role"] == "assistant" for m in opening
        )

    # the GRPO rollout of the same episodes (the model forced to write the oracle's turns) is the same sequence
    task_ids = ["create_task_1", "update_task_1", "update_task_with_message_history"]

    def make_env():
        return gym.make("tau2/mock-v0", obs_format="messages", disable_env_checker=True)

    scripts, base, _ = oracle_scripts(renderer, make_env, task_ids, think="" if template == "qwen3" else None)
    runner = PolicyRunner(
        HFGenerator(model, tok, do_sample=False, logits_processor=[ForceScript(tok, scripts, base)]),
        tok,
        max_new_tokens=200,
        sample_mode="sequence",
    )
    by_task = {r["task_id"]: r for r in tokens}
    for traj in runner.run([make_env() for _ in task_ids], [{"task_id": t} for t in task_ids]):
        assert traj.reward == 1.0
        row = by_task[traj.task_id]
        assert traj.prompt_ids + traj.completion_ids == row["input_ids"]
        assert [0] * len(traj.prompt_ids) + traj.env_mask == row["assistant_masks"]


def test_tokens_format_cli_and_errors(tmp_path, mock_results, capsys):
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("transformers")
    from hfutil import tiny

    _, tok = tiny()
    tok.save_pretrained(tmp_path / "tok")
    out = tmp_path / "ds"
    assert (
        main(
            [
                "export",
                str(mock_results),
                "--output",
                str(out),
                "--split",
                "none",
                "--format",
                "tokens",
                "--tokenizer",
                str(tmp_path / "tok"),
            ]
        )
        == 0
    )
    ds = datasets.load_from_disk(str(out))
    assert {"input_ids", "assistant_masks", "reward", "task_id"} <= set(ds.column_names)
    assert all(0 < sum(m) < len(m) for m in ds["assistant_masks"])
    assert main(["export", str(mock_results), "--output", str(out), "--format", "tokens"]) == 2
    assert "tokenizer" in capsys.readouterr().err


@pytest.mark.slow
def test_two_step_trl_sft_run_on_the_export(tmp_path):
    pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    from tau2_gym.training.export import export_dataset
    from tau2_gym.training.hf.tiny import tiny_model_and_tokenizer

    results = tmp_path / "mock.json"  # mock: a short policy keeps the sequences (and the test) short
    assert (
        main(
            [
                "rollout",
                "--domain",
                "mock",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--output",
                str(results),
                "--no-progress",
            ]
        )
        == 0
    )
    ds = export_dataset([results], tmp_path / "ds", split=None, min_reward=1.0).select(range(4))
    model, tokenizer = tiny_model_and_tokenizer(trl.chat_template_utils.qwen3_chat_template, domain="mock")
    cfg = trl.SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=2,
        max_length=8192,
        assistant_only_loss=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        dataloader_num_workers=0,
    )
    trainer = trl.SFTTrainer(
        model=model, args=cfg, train_dataset=ds.remove_columns(list(METADATA_COLUMNS)), processing_class=tokenizer
    )
    out = trainer.train()
    assert out.global_step == 2
    row = trainer.train_dataset[0]
    trained = sum(1 for label in row["labels"] if label != -100)
    assert 0 < trained < len(row["input_ids"])  # assistant-only loss: some tokens train, the prompt does not
