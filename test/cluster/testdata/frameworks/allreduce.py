# mpi4py as a user writes it: the ranks' sum, and which node each ran on.
import os
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank())
print(f"rank {comm.Get_rank()} size {comm.Get_size()} sum {total} node {os.environ['CUMULUS_NODE_RANK']}", flush=True)
