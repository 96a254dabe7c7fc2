# Saves its checkpoint 5 s after SIGTERM (as a slow real save would) and
# resumes from it on the next attempt.
import os, signal, sys, time

ckpt = os.path.join(os.environ["CUMULUS_CHECKPOINT_DIR"], "state.txt")
if os.path.exists(ckpt):
    print("resumed from " + open(ckpt).read().strip(), flush=True)
    sys.exit(0)

def save(signum, frame):
    print("SIGTERM: saving a checkpoint", flush=True)
    time.sleep(5)
    with open(ckpt, "w") as f:
        f.write("step 42")
    print("checkpoint saved", flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, save)
print("training", flush=True)
while True:
    time.sleep(0.1)
