"""Run-time classes a launch meets after it starts: a Ray head that is not there (GCS), a GPU that is
already busy when vLLM starts, a native crash signal and NCCL's system errors. Each
with the figures its line printed, and what to change."""

from __future__ import annotations

import re
from collections.abc import Sequence

from verl_setup.diagnose.finding import LogFinding, evidence_of
from verl_setup.diagnose.scan import Hit

_GCS = re.compile(r"Failed to connect to GCS at address (?P<address>\S*?)(?: within|\.?$)")


def ray_gcs(hits: Sequence[Hit]) -> LogFinding:
    """`Failed to connect to GCS at address A`: no Ray head answers at the address given."""
    facts: dict[str, str] = {}
    for hit in hits:
        if (m := _GCS.search(hit.text)) and "address" not in facts:
            facts["address"] = m["address"]
    address = facts.get("address", "")
    if address.startswith(":"):
        facts["empty_host"] = "yes"
        summary = (
            f"Ray was given the address {address!r}, with no host: the variable that should hold the "
            "head's address (MASTER_ADDR, HEAD_IP, ...) was empty when the command ran"
        )
        remedy: tuple[str, ...] = (
            "set the head's address before `ray start --address=HOST:PORT` on the worker nodes (echo it "
            "in the script: an unset variable leaves ':PORT')",
            "`verl-setup doctor --check ray` names the address a launch will join",
        )
    else:
        summary = (
            f"no Ray head answers at {address or 'the address given'}: the cluster it names is gone "
            "(a stale record of an old cluster) or not reachable from here"
        )
        remedy = (
            "`ray status` here: if no cluster runs, `ray stop` (this node's leftover Ray processes) and "
            "remove the stale /tmp/ray/ray_current_cluster, then start the head again, or let "
            "verl start its own local Ray (no RAY_ADDRESS, no ray_kwargs.ray_init.address)",
            "a head that runs elsewhere: check the host and port (`ray start --head --port`), and that "
            "the port is open between the nodes",
            "`verl-setup doctor --check ray -- <launch>` names the stale record and the address before "
            "launch",
        )
    return LogFinding(cls="ray-gcs", tier=0, summary=summary, evidence=evidence_of(hits), remedy=remedy,
                      facts=facts)  # fmt: skip


_FREE = re.compile(
    r"Free memory on device (?:(?P<device>\S+) )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is "
    r"less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)"
)


def gpu_memory_busy(hits: Sequence[Hit]) -> LogFinding:
    """vLLM found less free GPU memory at start than gpu_memory_utilization asks for."""
    facts: dict[str, str] = {}
    if m := _FREE.search(hits[0].text):
        facts = {k: v for k, v in m.groupdict().items() if v}
    held = float(facts.get("total", 0)) - float(facts.get("free", 0))
    device = f" on {facts['device']}" if "device" in facts else ""
    summary = (
        f"vLLM could not start{device}: {facts.get('free', '?')} of {facts.get('total', '?')} GiB free, and "
        f"gpu_memory_utilization={facts.get('util', '?')} asks for {facts.get('want', '?')} GiB; "
        f"{held:.2f} GiB was already held when it started"
    )
    remedy = (
        "find what holds the GPU: `nvidia-smi --query-compute-apps=pid,used_memory --format=csv` (a "
        "leftover run, another user); `verl-setup doctor --check gpu-memory -- <launch>` names the "
        "processes and compares the free memory with the launch's gpu_memory_utilization",
        "in verl the engine's share counts against the whole GPU, the trainer's weights included: lower "
        "actor_rollout_ref.rollout.gpu_memory_utilization below the free fraction "
        f"({float(facts.get('free', 0)) / max(float(facts.get('total', 1)), 1e-9):.2f} here)",
        "`verl-setup doctor --check fit -- <launch>` estimates the trainer's share before launch",
    )
    return LogFinding(cls="gpu-memory-busy", tier=0, summary=summary, evidence=evidence_of(hits),
                      remedy=remedy, facts=facts)  # fmt: skip


_SIGNAL = re.compile(r"\*\*\* (?P<signal>SIG[A-Z]+) received at time=")
_FATAL = re.compile(r"Fatal Python error: (?P<what>[A-Za-z ]+)")
_FATAL_SIGNAL = {
    "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL",
}  # fmt: skip
_WHO = re.compile(r"^\x1b?\[?[\d;]*m?\((?P<name>[A-Za-z_][\w.:-]*)? ?pid=(?P<pid>\d+)")
_PC = re.compile(r"PC: @\s+0x[0-9a-f]+\s+\S+\s+(?P<symbol>\S.*?)(?: \[repeated|$)")
_SO = re.compile(r"/(?P<lib>[\w.+-]+\.so(?:\.\d+)*)")
_FRAME = re.compile(r"@\s+0x[0-9a-f]+\s+(?:\d+|\(unknown\))\s+(?P<symbol>[^(\s][^\[]*?)\s*(?:\[repeated|$)")
_PYFILE = re.compile(
    r'File "[^"]*?(?:site-packages|dist-packages)/(?P<module>[^"]+?)\.py", line (?P<line>\d+)'
)
_MEANING = {
    "SIGSEGV": "an invalid memory access in native code",
    "SIGABRT": "native code called abort() (a failed check, an uncaught C++ exception, or torch ending the "
    "process after an NCCL watchdog timeout)",
    "SIGBUS": "a bus error: most often shared memory (/dev/shm, Ray's object store) that ran out",
    "SIGFPE": "an arithmetic fault in native code (an integer division by zero)",
    "SIGILL": "an instruction this CPU or GPU does not have (a wheel built for another architecture)",
}


def crash_signal(hits: Sequence[Hit]) -> LogFinding:
    """A worker killed by a signal: which worker, its pid, the signal, and the top of its native stack."""
    facts: dict[str, str] = {}
    for hit in hits:
        m = _SIGNAL.search(hit.text)
        f = _FATAL.search(hit.text)
        sig = m["signal"] if m else _FATAL_SIGNAL.get(f["what"].strip(), "") if f else ""
        if sig and "signal" not in facts:
            facts["signal"] = sig
            if w := _WHO.search(hit.text):
                facts.update({k: v for k, v in w.groupdict().items() if v})
            facts.update(_stack_top(hit))
            if "library" not in facts and (lib := _library_above(hit)):
                facts["library"] = lib
            if any("Watchdog" in line or "ProcessGroupNCCL" in line for line in hit.before):
                facts["after"] = "an NCCL watchdog timeout"
    sig = facts.get("signal", "a signal")
    who = facts.get("name", "a process") + (f" (pid {facts['pid']})" if "pid" in facts else "")
    top = facts.get("library") or facts.get("symbol") or facts.get("python_frame")
    summary = f"{who} died of {sig}: {_MEANING.get(sig, 'a native crash')}" + (
        f"; the top of its stack is {top}" if top else ""
    )
    remedy: list[str] = []
    if sig == "SIGBUS":
        remedy.append(
            "give the workers more shared memory: docker run --shm-size=16g (or --ipc=host); in Kubernetes "
            "an emptyDir with medium: Memory at /dev/shm; `verl-setup doctor --check memory` reads /dev/shm"
        )
    if sig == "SIGABRT" or "after" in facts:
        remedy.append(
            "read the lines just before the abort: a `Watchdog caught collective operation timeout` means "
            "torch ended the process after an NCCL timeout (see nccl-timeout), a `Check failed` names the "
            "failed check"
        )
    if sig in ("SIGSEGV", "SIGFPE", "SIGILL"):
        remedy.append(
            "a crash inside a compiled extension is almost always a build or version mismatch: "
            "`verl-setup verify` checks that each extension loads against the installed torch and CUDA; "
            "install the row's exact pins rather than mixing wheels"
        )
    if "library" in facts:
        remedy.append(f"the crash is in {facts['library']}: its version is the first thing to compare")
    elif "python_frame" in facts:
        remedy.append(f"the Python frame that called into native code is {facts['python_frame']}")
    remedy.append(
        "the worker's own .err in Ray's session folder (logs/worker-*-<pid>.err) holds the whole stack: "
        "pass the session folder to diagnose"
    )
    return LogFinding(cls="crash-signal", tier=0, summary=summary, evidence=evidence_of(hits),
                      remedy=tuple(remedy), facts=facts)  # fmt: skip


def _stack_top(hit: Hit) -> dict[str, str]:
    """The library (a .so path), else the symbol, else the Python frame at the top of the stack."""
    found: dict[str, str] = {}
    for line in (hit.text, *hit.after):
        if "library" not in found and (so := _SO.search(line)):
            found["library"] = so["lib"]
        if "symbol" not in found:
            pc = _PC.search(line)
            if pc and pc["symbol"].strip() != "(unknown)":
                found["symbol"] = pc["symbol"].strip()
            elif (fr := _FRAME.search(line)) and not line.lstrip().startswith("PC:") and "PC:" not in line:
                found["symbol"] = fr["symbol"].strip()
        if "python_frame" not in found and (py := _PYFILE.search(line)):
            found["python_frame"] = f"{py['module'].replace('/', '.')}:{py['line']}"
    return found


# A frame that names its library: Ray's "Stack trace:" lines (`/path/lib.so(+0x..) [0x..] symbol`)
# and torch's C++ exception frames (`frame #N: symbol + 0x.. (0x.. in /path/lib.so)`).
_LIB_FRAME = re.compile(r"/(?P<lib>[\w.+-]+\.so(?:\.\d+)*)(?:\(|\)|\s|$)")
_C_RUNTIME = ("libc.so", "libstdc++.so", "libpthread.so", "libgcc_s.so", "ld-linux")
_HANDLERS = ("_raylet.so", "libc10.so")  # Ray's crash handler, torch's exception constructor
_GAP = 6  # lines between the signal line and the stack above it (blank, PC:, @ frames)


def _library_above(hit: Hit) -> str | None:
    """The library at the top of the native stack printed just above the signal line (an abort
    follows the stack of what threw: Ray's terminate handler or torch's exception), past the C
    runtime's and the handlers' own frames; a handler's library only when nothing else is there."""
    block: list[str] = []
    gap = 0
    for line in reversed(hit.before):
        m = _LIB_FRAME.search(line)
        if m:
            block.append(m["lib"])
        elif block or gap >= _GAP:
            break
        else:
            gap += 1
    block.reverse()  # top of the stack first
    named = [lib for lib in block if not lib.startswith(_C_RUNTIME)]
    for lib in named:
        if not lib.startswith(_HANDLERS):
            return lib
    return named[0] if named else None


_NCCL_VERSION = re.compile(r"NCCL version (?P<version>[\d.]+)")


def nccl_error(hits: Sequence[Hit]) -> LogFinding:
    """NCCL's `unhandled system error`: a system call (socket, shared memory, IB verbs) failed."""
    facts: dict[str, str] = {}
    for hit in hits:
        if (m := _NCCL_VERSION.search(hit.text)) and "nccl" not in facts:
            facts["nccl"] = m["version"]
    summary = (
        "NCCL failed with `unhandled system error`: a system call it needs (a socket to a peer, a "
        "shared-memory segment, InfiniBand/RoCE verbs) failed"
        + (f" (NCCL {facts['nccl']})" if "nccl" in facts else "")
    )
    remedy = (
        "rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET): the WARN line just before the error names "
        "the call that failed",
        "several nodes: NCCL_SOCKET_IFNAME naming the interface between them; on RoCE/IB without a working "
        "fabric, NCCL_IB_DISABLE=1 to confirm",
        "in a container: --shm-size=16g or --ipc=host (a 64 MiB /dev/shm fails here too)",
        "`verl-setup doctor --check collective -- <launch>` runs a real all-reduce and shows the "
        "interface NCCL picks",
    )
    return LogFinding(cls="nccl-error", tier=0, summary=summary, evidence=evidence_of(hits), remedy=remedy,
                      facts=facts)  # fmt: skip
