# tests/integration/ptydrive.py ANSWERS CMD...: run CMD on a new
# pseudo-terminal; answer each "Approve?" prompt with the next of the
# comma-separated ANSWERS; print everything the terminal showed, then
# "EXIT n".  For the tty approval tests (admin_lib.sh: pty_drive).
import os, pty, select, sys, time
answers = [a for a in sys.argv[1].split(",") if a]
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out, seen, deadline = b"", 0, time.time() + 60
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.2)
    if not r:
        continue
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
    while out.count(b"Approve?") > seen:
        seen += 1
        if answers:
            time.sleep(0.1)
            os.write(fd, (answers.pop(0) + "\n").encode())
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
print("\nEXIT %d" % os.waitstatus_to_exitcode(status))
