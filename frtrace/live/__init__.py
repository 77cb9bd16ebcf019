"""`frtrace live`: a running job's Flight Recorder and stacks, fetched from PyTorch's debug
server and analyzed as a folder of dumps.

Each rank of a job that called `torch.distributed.debug.start_debug_server()` serves HTTP
and registers its address in the job's TCPStore (store.py reads it). fetch.py asks every
rank at once for its recorder and its stacks, within a deadline and a size bound per
answer, over http.py's client (no redirect followed, nothing executed), and writes what
came back as ordinary files: `trace_<rank>.json` and `stacks/rank<R>.txt` behind the label
`frtrace collect` writes. The command then analyzes that folder exactly as `frtrace DIR`
does; watch.py repeats the round and compares each with the previous one as `--since` does.
torch is imported only to read the store, inside store.py's function.
"""
