"""mpi4py's default start (MPI_Init_thread with MPI_THREAD_MULTIPLE) over the
adapter, then a pickled send/recv and a buffer exchange between ranks 0 and 1."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
assert MPI.Query_thread() == MPI.THREAD_MULTIPLE, MPI.Query_thread()
assert comm.size == 2, comm.size
other = 1 - comm.rank
comm.send({"from": comm.rank, "data": list(range(1000))}, dest=other, tag=7)
got = comm.recv(source=other, tag=7)
assert got == {"from": other, "data": list(range(1000))}, got
out = bytearray([comm.rank] * 100000)
back = bytearray(100000)
comm.Sendrecv(out, dest=other, sendtag=8, recvbuf=back, source=other, recvtag=8)
assert back == bytearray([other] * 100000)
comm.Barrier()
if comm.rank == 0:
    print("mpi4py: thread level MULTIPLE, send/recv between 2 ranks")
