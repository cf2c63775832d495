package io.pagewire.client;

/**
 * One operation for {@link QueuePair#post}. Local memory is named by a registered region and an
 * address in it, remote memory by an address and the peer's rkey, event counters by their id on the
 * peer's endpoint.
 */
public record WorkRequest(Opcode opcode, MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
        int counterId, long add) {

    /** RDMA WRITE of [localAddress, +length) to the peer's [remoteAddress, +length). */
    public static WorkRequest write(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey) {
        return new WorkRequest(Opcode.WRITE, local, localAddress, length, remoteAddress, rkey, 0, 0);
    }

    /** A WRITE that then adds one to the peer's event counter {@code counterId}, once the data is visible there. */
    public static WorkRequest writeWithNotify(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
            int counterId) {
        return new WorkRequest(Opcode.WRITE_WITH_NOTIFY, local, localAddress, length, remoteAddress, rkey, counterId, 0);
    }

    /** RDMA READ of the peer's [remoteAddress, +length) into [localAddress, +length). */
    public static WorkRequest read(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey) {
        return new WorkRequest(Opcode.READ, local, localAddress, length, remoteAddress, rkey, 0, 0);
    }

    /** Adds {@code add} to the peer's event counter; the completion's value is the counter before. */
    public static WorkRequest fetchAdd(int counterId, long add) {
        return new WorkRequest(Opcode.FETCH_ADD, null, 0, 0, 0, 0, counterId, add);
    }
}
