"""The doctor's verdicts, one module per category of check: pure functions of the evidence, each
marked with @verdict (core/doctor/verdict.py). CHECK_MODULES is the whole list."""

from core.doctor.checks import (
                                access,
                                env,
                                libraries,
                                machine,
                                multigpu,
                                nvidia,
                                rocm,
                                serving,
                                system,
                                toolchain,
                                torch,
)

CHECK_MODULES = (access, env, libraries, machine, multigpu, nvidia, rocm, serving, system, toolchain, torch)
