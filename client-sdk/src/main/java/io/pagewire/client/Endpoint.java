package io.pagewire.client;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * An application's process on a node: its virtual memory, the regions it registered with the NIC,
 * its queue pairs and its event counters. Closing it (or the application going away) closes its
 * queue pairs, releases its pins and frees its memory.
 */
public interface Endpoint extends AutoCloseable {
    int id();

    String nodeId();

    int pageSize();

    /** Reserves virtual memory; pages get frames when first touched. Returns where it starts. */
    long allocate(long length);

    CompletableFuture<Long> allocateAsync(long length);

    /** Frees an allocation; regions registered on it stop working. */
    void free(long address);

    CompletableFuture<Void> freeAsync(long address);

    /**
     * Pushes the resident pages of [address, +length) out of the node's memory, keeping their
     * contents, as {@code madvise(MADV_PAGEOUT)} does: the next access by the CPU or the NIC faults.
     * Pinned pages stay. Returns how many pages went; what tests use to force page faults.
     */
    int pageOut(long address, long length);

    /**
     * Whether this process reaches the endpoint's pages directly, as the node's CPU: it maps the
     * node's memory (a co-located application of the node's user, with shared memory on), so the
     * stores, loads, word atomics and waits below run at memory speed with no call while a page is
     * resident. Otherwise each of them is a call to the node, with the same results.
     */
    boolean sharesMemory();

    /** Copies bytes into memory, as a CPU store would (faulting pages in). */
    void store(long address, byte[] data);

    /** Copies the remaining bytes of {@code src} into memory at {@code address}, advancing its position: a bulk copy. */
    void store(long address, ByteBuffer src);

    /** Copies {@code dst.remaining()} bytes of memory at {@code address} into {@code dst}, advancing its position. */
    void load(long address, ByteBuffer dst);

    /** The 8-byte little-endian word at an 8-byte aligned address, read as one atomic load. */
    long loadLong(long address);

    /** Writes the 8-byte little-endian word at an 8-byte aligned address as one atomic store. */
    void storeLong(long address, long value);

    /** Replaces the word at {@code address} with {@code value} if it is {@code expected}, atomically; returns what it was. */
    long compareAndSwapLong(long address, long expected, long value);

    /** Adds {@code delta} to the word at {@code address}, atomically; returns what it was. */
    long fetchAddLong(long address, long delta);

    /**
     * Waits until the 8-byte word at {@code address} is no longer {@code value}, and returns it: how a
     * receiver learns that an RDMA WRITE landed, by watching its own buffer, as {@code ib_write_lat}
     * does. On a busy-polling connection the thread spins on the word; otherwise it spins briefly, then
     * sleeps until the node places received data over the word. Without shared memory it polls the
     * node with loads. Returns {@code value} itself only when the timeout passed.
     */
    long awaitChange(long address, long value, Duration timeout);

    CompletableFuture<Void> storeAsync(long address, byte[] data);

    /** Copies bytes out of memory. */
    byte[] load(long address, int length);

    CompletableFuture<byte[]> loadAsync(long address, int length);

    /** Registers [address, address + length) with the NIC in a mode, with rights. */
    MemoryRegion register(long address, long length, RegistrationMode mode, Set<Access> access);

    CompletableFuture<MemoryRegion> registerAsync(long address, long length, RegistrationMode mode, Set<Access> access);

    /** Registers the whole address space for on-demand paging (address 0, any length), as {@code IBV_ACCESS_ON_DEMAND} allows. */
    MemoryRegion registerImplicit(Set<Access> access);

    /** Creates a queue pair, to be connected to one on a peer with {@link QueuePair#connect}. */
    QueuePair createQueuePair();

    CompletableFuture<QueuePair> createQueuePairAsync();

    /** Creates a queue pair whose SENDs take receives from a shared receive queue of this endpoint. */
    QueuePair createQueuePair(SharedReceiveQueue srq);

    /** Creates a shared receive queue, for queue pairs made with {@link #createQueuePair(SharedReceiveQueue)}. */
    SharedReceiveQueue createSharedReceiveQueue();

    /** Creates a queue pair here and one on {@code remote}'s endpoint, and connects them both ways. */
    QueuePair connect(Endpoint remote);

    /**
     * Handles, on the calling thread, what the node has delivered for this endpoint and nobody has
     * handled yet (completions, counter changes), running the callbacks they trigger; returns how many
     * it handled. A thread that busy-polls calls this in its loop, as an ibverbs application polls its
     * completion queue or a UCX one calls {@code ucp_worker_progress}: then no other thread stands
     * between the node and it. Without shared-memory rings it returns 0 (the session stream delivers
     * on its own threads).
     */
    int poll();

    /** Creates an event counter peers may notify (REMOTE_WRITE) and/or FETCH_ADD (REMOTE_ATOMIC). */
    EventCounter createEventCounter(Set<Access> access);

    CompletableFuture<EventCounter> createEventCounterAsync(Set<Access> access);

    @Override
    void close();
}
