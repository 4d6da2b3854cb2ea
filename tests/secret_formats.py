"""The 20 ways a secret reaches a log, a variable or a flag in round 4's trials
(shared/reference/reliability-review-2026-12-c.md, "R. Secrets"): 10 the masker caught then, 10 it
missed. Each holds a unique marker `Xk7leakNN` that must never be printed."""

from __future__ import annotations

import base64

MARKER = "Xk7leak"
BASIC = base64.b64encode(f"alice:{MARKER}07".encode()).decode()

# (id, the text as a log line or a variable's value, what must not appear)
FORMATS: list[tuple[str, str, str]] = [
    # masked in round 3 already
    ("export", f"export WANDB_API_KEY={MARKER}01", MARKER),
    ("quoted-assign", f'HF_TOKEN="{MARKER}02"', MARKER),
    ("yaml-colon", f"WANDB_API_KEY: {MARKER}03", MARKER),
    ("lowercase", f"hf_token={MARKER}04", MARKER),
    ("flag-hf-token", f"--hf_token hf_{MARKER}05abcdefghijklmnopqrst", MARKER),
    ("aws-ini", f"aws_secret_access_key = {MARKER}06", MARKER),
    ("url-userinfo", f"https://alice:{MARKER}08@pypi.corp.example/simple/", MARKER),
    ("password-spaces", f'PASSWORD = "{MARKER}09 with spaces"', MARKER),
    ("bare-hf-token", f"token hf_{MARKER}10abcdefghijklmnopqrstu in a log", MARKER),
    ("plain-assign", f"WANDB_API_KEY={MARKER}11", MARKER),
    # leaked in round 4 (R1)
    ("python-dict", f"{{'WANDB_API_KEY': '{MARKER}12', 'lr': 1e-6}}", MARKER),
    ("json", f'{{"env_vars": {{"HF_TOKEN": "{MARKER}13"}}}}', MARKER),
    ("runtime-env", f"runtime_env={{'env_vars': {{'HF_TOKEN': '{MARKER}14', 'X': '1'}}}}", MARKER),
    ("aws-dict", f"{{'aws_secret_access_key': '{MARKER}15'}}", MARKER),
    ("bearer", f"Authorization: Bearer {MARKER}16", MARKER),
    ("token-header", f"authorization: token {MARKER}17", MARKER),
    ("basic-header", f"Authorization: Basic {BASIC}", BASIC),
    ("wandb-login", f"wandb login {MARKER}18", MARKER),
    (
        "wandb-key-flag",
        f"python3 -m verl.trainer.main_ppo --wandb-key {MARKER}19 trainer.n_gpus_per_node=8",
        MARKER,
    ),
    # a token across diagnose's 400-character cut
    ("cut-token", "x" * 385 + f" hf_{MARKER}20splitaaaaaaaaaaaaaaaaaaaa", MARKER),
]
