# A 3-node PyTorch DDP job over gloo, as a user writes it: every rank
# trains, writes a file of its own, and only rank 0 saves the model, after
# the other ranks have finished and gone.
import os, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x = torch.randn(8, 4) + rank
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
out = os.environ["CUMULUS_OUTPUT_DIR"]
with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
    f.write(f"rank {rank} of {world}, loss {loss.item():.4f}\n")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank {rank} world {world} allreduce {t.item():.0f}", flush=True)
dist.barrier()
dist.destroy_process_group()
if rank == 0:
    time.sleep(2)  # the other ranks are done and their outputs uploaded
    torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
    print("rank 0 saved the model", flush=True)
