"""Synthetic Flight Recorder dumps from a simulated Megatron-style job, healthy or faulted.

Real hangs are rare and their dumps private; a simulator that behaves like NCCL (in-order
GPU streams, collectives that wait for every member) gives analyzers ground truth to check.
"""

from frtrace.synth.faults import FAULT_KINDS, Fault
from frtrace.synth.layout import Layout
from frtrace.synth.sim import DumpMap, JobSpec, SyntheticJob, simulate, spec_for_entries
from frtrace.synth.writer import OLD_FORMATS, as_format, to_json_dump, write_job

__all__ = [
    "FAULT_KINDS",
    "OLD_FORMATS",
    "DumpMap",
    "Fault",
    "JobSpec",
    "Layout",
    "SyntheticJob",
    "as_format",
    "simulate",
    "spec_for_entries",
    "to_json_dump",
    "write_job",
]
