"""`frtrace collect`: what a hung job leaves on one node, gathered into one folder.

Run on every node of a hung job (srun, pdsh), it finds the training processes from the
`RANK` in their environment, writes each one's py-spy stack under a label naming its rank,
copies the Flight Recorder dumps they wrote, optionally asks each rank for a fresh dump, and
records what it did in `collect.json`. Neither torch nor numpy is imported: the node may be
busy, and the job's Python may not be this one.
"""
