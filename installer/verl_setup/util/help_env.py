"""The end of each command's --help: the exit codes, then only the variables that command reads
(every variable, with what reads it, is in docs/reference/environment.md)."""

from __future__ import annotations

EXIT = """\
exit codes: 0 ok, 1 unexpected error, 2 bad input (a flag, file or variable), 3 no matrix row
fits, 4 install or lock failed, 5 a check failed, 130 interrupted. With --json, stdout is one
envelope {schema, command, ok, error, data} on failure too (schemas in verl_setup/schemas/)."""

PLAN = """\
VERL_SETUP_DRIVER, _GPU, _SM, _GPU_COUNT, _NO_GPU, _NPU, _CANN, _ROCM, _PYTHON, _VERL, _ENGINE,
_BACKEND, _POLICY, _PREFER, _ARCH, _GLIBC, _HOST, _MATRIX (below flags, above a team config, a
host file and detection); UV_CUDA_DRIVER_VERSION and CONDA_OVERRIDE_CUDA override the detected driver"""
WHEELS = "VERL_SETUP_WHEEL_SOURCES (as --wheel-source, comma-separated)"
HOST = "VERL_SETUP_HOST (as --host)"
MATRIX = "VERL_SETUP_MATRIX (as --matrix)"
CACHE = (
    "VERL_SETUP_CACHE_DIR holds the parsed matrix and interpreter answers "
    "(else $XDG_CACHE_HOME/verl-setup, ~/.cache/...)"
)
EXTRA = """\
`matrix prove` and `matrix check` skip the rows whose torch is on an extra index unless
VERL_SETUP_PROVE_EXTRA_INDEXES=1 (it is not tested whether that index can be reached)"""
PROVE = """\
`matrix prove` leaves a row's git sources out unless VERL_SETUP_PROVE_GIT=1, and its packages
built against torch out except those VERL_SETUP_PROVE_WITH names (comma-separated; they come from
the wheel sources, VERL_SETUP_PROVE_WHEEL_SOURCES for a proof: it reads no other VERL_SETUP_*); its
`trains` step runs `smoke` (VERL_SETUP_PROVE_TRAINS=0 leaves it out), for a GPU row only on a GPU
host: VERL_SETUP_PROVE_GPUS=N and VERL_SETUP_PROVE_GPU_NAME, which .ci/gpu-smoke sets"""
HTTP = """VERL_SETUP_ALLOW_HTTP=1 lets a wheel source or download use plain HTTP beyond this machine; the
tool's own downloads trust SSL_CERT_FILE, REQUESTS_CA_BUNDLE, the system store and ~/.netrc"""
UV = """\
uv reads its own UV_* settings, except those that would re-resolve a row (UV_TORCH_BACKEND,
UV_EXTRA_INDEX_URL, ...), which are dropped with a warning"""
DEBUG = "VERL_SETUP_DEBUG=1 shows tracebacks"
DOCS = "every variable, and what reads it: docs/reference/environment.md"

# Commands that run uv (their --help names the UV_* rule).
UV_COMMANDS = ("install", "lock", "bundle", "render", "wheelhouse build", "docker build", "matrix prove")


def epilog(command: str, options: set[str]) -> str:
    """The --help epilog of `command` ("matrix prove"), given its option strings."""
    parts = []
    if "--driver" in options:
        parts.append(PLAN)
    else:
        parts += [HOST] if "--host" in options else []
        parts += [MATRIX] if "--matrix" in options else []
    parts += [WHEELS, HTTP] if "--wheel-source" in options else []
    parts += [CACHE] if "--matrix" in options or "--driver" in options else []
    parts += [EXTRA] if command in ("matrix prove", "matrix check") else []
    parts += [PROVE] if command == "matrix prove" else []
    parts += [UV] if command in UV_COMMANDS else []
    parts += [DEBUG, DOCS]
    return f"{EXIT}\n\nenvironment: " + ";\n".join(parts) + "."


def top_level() -> str:
    """`verl-setup --help`'s epilog: the exit codes and where the variables are documented."""
    return f"{EXIT}\n\nenvironment: each command's --help names the variables it reads; {DOCS}."


def every_variable() -> str:
    """All the paragraphs, for docs/reference/environment.md and the test that every variable read is in."""
    return "\n".join((PLAN, WHEELS, HTTP, HOST, MATRIX, CACHE, EXTRA, PROVE, UV, DEBUG))
