"""issue 32, item 4: a known issue prints in full only where the launch uses the feature it breaks
(plan and install show one line each)."""

from __future__ import annotations

from verl_setup.doctor.checks.known_issues import known_issue_findings
from verl_setup.doctor.probes.launch_command import parse_launch
from verl_setup.matrix.load import load_matrix

ROW = load_matrix(None).row("verl0.9-vllm0.24.0")
BASE = ("python3", "-m", "verl.trainer.main_ppo", "trainer.n_gpus_per_node=8")


def test_a_launch_with_qat_gets_the_qat_issue_in_full_with_its_source() -> None:
    launch = parse_launch((*BASE, "actor_rollout_ref.actor.qat.enable=True"))
    (finding,) = known_issue_findings(ROW, launch)
    assert finding.status == "warn"
    qat = ROW.known_issues[0]
    assert finding.message == (
        f"this launch uses QAT (actor_rollout_ref.actor.qat.enable=True); known issue ki1 of row "
        f"verl0.9-vllm0.24.0: {qat.summary}"
    )
    assert finding.remedy == f"source: {qat.source}"


def test_a_launch_without_the_feature_or_with_it_off_gets_none() -> None:
    assert known_issue_findings(ROW, parse_launch(BASE)) == []
    assert known_issue_findings(ROW, parse_launch((*BASE, "actor_rollout_ref.actor.qat.enable=False"))) == []


def test_nvfp4_rollout_names_both_nvfp4_issues() -> None:
    launch = parse_launch((*BASE, "actor_rollout_ref.rollout.quantization=nvfp4"))
    assert [
        f.message.split(";")[1].split(" of row")[0].strip() for f in known_issue_findings(ROW, launch)
    ] == [
        "known issue ki1",
        "known issue ki2",
    ]
