package io.pagewire.client.impl;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

/**
 * The two rings of a session in shared memory, and their record layouts: the wire between an
 * application and a node on the same host, as Aeron's client and media driver share their command
 * and broadcast buffers. The node creates the file and both sides map it; the application posts work
 * requests on the request ring, the node puts completions, refusals and counter changes on the event
 * ring. Both are Agrona many-to-one ring buffers (any thread of either side may write).
 *
 * <pre>
 *  file:  0 +---------------------------------------------------------------+
 *           | magic (8) | nonce (8) | ring capacity (4) | pad (12)             |
 *        32 | node agent asleep (4) | application agent asleep (4) | pad to 128 |
 *       128 +---------------------------------------------------------------+
 *           | request ring: capacity bytes of records + Agrona trailer       |
 *           +---------------------------------------------------------------+
 *           | event ring: capacity bytes of records + Agrona trailer         |
 *           +---------------------------------------------------------------+
 *
 *  POST (request ring, type 1):      qpn (4) | count (4) | count x work request (72 each):
 *      wr id (8) | opcode and flags (4) | lkey (4) | local address (8) | length (4) | counter id (4)
 *      | remote address (8) | rkey (8) | add (8) | immediate (4) | padding (4) | swap (8)
 *  POST_RECEIVE (request ring, type 2): qpn (4) | shared receive queue id (4, 0 for the queue pair's own)
 *      | count (4) | padding (4) | count x receive (24 each): wr id (8) | lkey (4) | length (4) | address (8)
 *  COMPLETION (event ring, type 1):  wr id (8) | qpn (4) | opcode (4) | status (4) | error length (4)
 *      | bytes (8) | value (8) | flags (4: bit 0, has immediate) | immediate (4) | error (UTF-8)
 *  REFUSED (event ring, type 2):     wr id (8) | qpn (4) | error length (4) | error (UTF-8)
 *  COUNTER (event ring, type 3):     counter id (4) | padding (4) | value (8)
 * </pre>
 *
 * Opcodes and statuses are the numbers of verbs.proto's enums. A work request's opcode is in the low
 * 16 bits of its word, flags above it: {@link #UNSIGNALED_FLAG}.
 */
public final class SessionRings {
    public static final long MAGIC = 0x50_57_52_49_4E_47_30_32L; // "PWRING02"
    public static final int HEADER_BYTES = 128;
    private static final int NONCE_OFFSET = 8;
    private static final int CAPACITY_OFFSET = 16;
    private static final int NODE_ASLEEP_OFFSET = 32;
    private static final int APP_ASLEEP_OFFSET = 36;

    public static final int POST = 1;
    public static final int POST_RECEIVE = 2;
    public static final int COMPLETION = 1;
    public static final int REFUSED = 2;
    public static final int COUNTER = 3;

    public static final int POST_HEADER_BYTES = 8;
    public static final int WORK_REQUEST_BYTES = 72;
    public static final int POST_RECEIVE_HEADER_BYTES = 16;
    public static final int RECEIVE_REQUEST_BYTES = 24;
    /** In a work request's opcode word: it completes silently when it succeeds. */
    public static final int UNSIGNALED_FLAG = 1 << 16;
    public static final int COMPLETION_FIXED_BYTES = 48;
    /** In a completion's flags: it carries immediate data. */
    public static final int HAS_IMMEDIATE_FLAG = 1;
    public static final int REFUSED_FIXED_BYTES = 16;
    public static final int COUNTER_BYTES = 16;

    private final Path path;
    private final RingBuffer requests;
    private final RingBuffer events;
    private final long nonce;
    private final UnsafeBuffer header;

    private SessionRings(Path path, MappedByteBuffer mapped) {
        // The mapping lives as long as the buffers that wrap it (Agrona's keep a reference to it).
        this.path = path;
        this.header = new UnsafeBuffer(mapped, 0, HEADER_BYTES);
        if (header.getLong(0) != MAGIC) {
            throw new IllegalArgumentException(path + " is not a Pagewire ring file");
        }
        this.nonce = header.getLong(NONCE_OFFSET);
        int capacity = header.getInt(CAPACITY_OFFSET);
        int ringBytes = capacity + RingBufferDescriptor.TRAILER_LENGTH;
        if (capacity <= 0 || Integer.bitCount(capacity) != 1 || HEADER_BYTES + 2L * ringBytes > mapped.capacity()) {
            throw new IllegalArgumentException(path + " has a bad ring capacity " + capacity);
        }
        this.requests = new ManyToOneRingBuffer(new UnsafeBuffer(mapped, HEADER_BYTES, ringBytes));
        this.events = new ManyToOneRingBuffer(new UnsafeBuffer(mapped, HEADER_BYTES + ringBytes, ringBytes));
    }

    /** The file's size for rings of {@code capacity} bytes each. */
    public static long fileBytes(int capacity) {
        return HEADER_BYTES + 2L * (capacity + RingBufferDescriptor.TRAILER_LENGTH);
    }

    /**
     * Creates a new ring file (the node's side) with its header written.
     *
     * @param capacity each ring's record space in bytes, a power of two
     */
    public static SessionRings create(Path path, int capacity, long nonce) {
        if (capacity < 4096 || Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("ring capacity must be a power of two of at least 4096, was " + capacity);
        }
        // A new file (never one someone placed there first), readable and writable by the node's user
        // only: whoever maps a session's rings can post as that session.
        try (FileChannel file = createOwnerOnly(path)) {
            MappedByteBuffer mapped = file.map(FileChannel.MapMode.READ_WRITE, 0, fileBytes(capacity));
            UnsafeBuffer header = new UnsafeBuffer(mapped, 0, HEADER_BYTES);
            header.putLong(NONCE_OFFSET, nonce);
            header.putInt(CAPACITY_OFFSET, capacity);
            header.putLongVolatile(0, MAGIC);
            return new SessionRings(path, mapped);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create ring file " + path + ": " + e.getMessage(), e);
        }
    }

    private static FileChannel createOwnerOnly(Path path) throws IOException {
        try {
            return FileChannel.open(path, java.util.Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE),
                    java.nio.file.attribute.PosixFilePermissions.asFileAttribute(java.nio.file.attribute.PosixFilePermissions.fromString("rw-------")));
        } catch (UnsupportedOperationException notPosix) {
            return FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE);
        }
    }

    /** Maps an existing ring file (the application's side). */
    public static SessionRings open(Path path) throws IOException {
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return new SessionRings(path, channel.map(FileChannel.MapMode.READ_WRITE, 0, channel.size()));
        }
    }

    public Path path() {
        return path;
    }

    /** The header's nonce: the application sends it back to prove it maps the node's memory. */
    public long nonce() {
        return nonce;
    }

    // ---- sleeping agents and doorbells -------------------------------------------------------------
    //
    // An agent that finds its ring empty for a while says so in the header, looks once more, and
    // parks. A writer that then commits a record takes the flag (only one writer wins it) and rings
    // the doorbell, a message on the session's gRPC stream that unparks the agent. The full fences
    // make the store-then-load on each side a Dekker pair: no record is left unseen by a sleeper.

    /** The node's agent is going to sleep (true) or is awake (false). */
    public void nodeAsleep(boolean asleep) {
        header.putIntVolatile(NODE_ASLEEP_OFFSET, asleep ? 1 : 0);
    }

    /** The application's agent is going to sleep (true) or is awake (false). */
    public void appAsleep(boolean asleep) {
        header.putIntVolatile(APP_ASLEEP_OFFSET, asleep ? 1 : 0);
    }

    /** After writing a request: whether the node's agent sleeps and this writer must ring (clears the flag). */
    public boolean takeNodeAsleep() {
        java.lang.invoke.VarHandle.fullFence();
        return header.getIntVolatile(NODE_ASLEEP_OFFSET) == 1 && header.compareAndSetInt(NODE_ASLEEP_OFFSET, 1, 0);
    }

    /** After writing an event: whether the application's agent sleeps and this writer must ring (clears the flag). */
    public boolean takeAppAsleep() {
        java.lang.invoke.VarHandle.fullFence();
        return header.getIntVolatile(APP_ASLEEP_OFFSET) == 1 && header.compareAndSetInt(APP_ASLEEP_OFFSET, 1, 0);
    }

    /** Work requests, application to node. */
    public RingBuffer requests() {
        return requests;
    }

    /** Completions, refusals and counter changes, node to application. */
    public RingBuffer events() {
        return events;
    }

    /**
     * Deletes the file (the node's side, when the session ends). The mapping itself is never unmapped
     * by hand: a thread that still reads or writes a ring would fault on it. It goes with the last
     * reference, when the garbage collector frees the buffer.
     */
    public void deleteFile() {
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            // A leftover file in the ring directory is harmless; names are never reused.
        }
    }
}
