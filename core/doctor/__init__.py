"""The environment doctor: every check of a ROCm (or NVIDIA, or CPU-only) box, with what was seen
and the exact command that fixes it.

    evidence.py   the record of one machine (command outputs, files, env, probe JSON); replayable
                  from a fixture folder and recordable from this machine
    probes.py     gathering that evidence, in parallel, each probe with a timeout
    facts.py      what the evidence says about the machine (GPUs, ROCm version, torch build, ...)
    access.py rocm.py nvidia.py torch_checks.py env_checks.py libraries.py serving.py
    multigpu.py toolchain.py system.py machine.py
                  the verdicts: pure functions of the evidence, one DoctorCheck each
    runner.py     probes -> verdicts, as events while probes finish; re-run one check or all
    report.py     the Markdown report and the plain-text rendering

Nothing here imports torch & co.: they are imported only inside probe subprocesses.
"""
