"""frtrace: find the rank that broke a hung PyTorch job, from its Flight Recorder dumps.

Importing this package never imports torch: analysis works on dumps alone.
"""

__version__ = "0.1.0"
