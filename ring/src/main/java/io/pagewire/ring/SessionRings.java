package io.pagewire.ring;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.VarHandle;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

/**
 * The two rings of a session in shared memory: the wire between an application and a node on the
 * same host, as Aeron's client and media driver share their command and broadcast buffers. The node
 * creates the file and both sides map it; the application posts work requests on the request ring
 * ({@link PostRecord}, {@link PostReceiveRecord}), the node puts completions, refusals and counter
 * changes on the event ring ({@link CompletionRecord}, {@link RefusedRecord}, {@link CounterRecord}).
 * Both are Agrona many-to-one ring buffers (any thread of either side may write), whose own record
 * header and trailer Agrona's {@code RingBufferDescriptor} lays out.
 *
 * <pre>
 *   file:
 *   0                                       8                                      16
 *   +---------------------------------------+---------------------------------------+
 *   | magic 0x505752494E473032 ("PWRING02") | nonce                                 |
 *   +-------------------+-------------------+---------------------------------------+
 *  16                  20                                                          32
 *   | ring capacity     | (zero)                                                    |
 *   +-------------------+-------------------+---------------------------------------+
 *  32                  36                  40                                      48
 *   | node asleep       | application asleep| watched address                       |
 *   +-------------------+-------------------+---------------------------------------+
 *  48                                                                             128
 *   | (zero)                                                                        |
 *   +-------------------------------------------------------------------------------+
 *  128
 *   | request ring: capacity bytes of records, then the ring's trailer              |
 *   +-------------------------------------------------------------------------------+
 *   | event ring: capacity bytes of records, then the ring's trailer                |
 *   +-------------------------------------------------------------------------------+
 *
 *   ring capacity: a power of two of at least 4096. nonce: what the application sends back on its
 *   session stream to prove it maps this file. asleep flags: 1 while that side's reader sleeps and
 *   wants a doorbell (see takeNodeAsleep and takeAppAsleep), else 0. watched address: the word of
 *   its memory an application thread sleeps on (0: none); data placed over it rings the doorbell.
 * </pre>
 */
public final class SessionRings {
    public static final long MAGIC = 0x50_57_52_49_4E_47_30_32L; // "PWRING02"
    public static final int HEADER_BYTES = 128;
    private static final int NONCE_OFFSET = 8;
    private static final int CAPACITY_OFFSET = 16;
    private static final int NODE_ASLEEP_OFFSET = 32;
    private static final int APP_ASLEEP_OFFSET = 36;
    private static final int WATCHED_ADDRESS_OFFSET = 40;

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
        try (FileChannel file = SharedFiles.createOwnerOnly(path)) {
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
        VarHandle.fullFence();
        return header.getIntVolatile(NODE_ASLEEP_OFFSET) == 1 && header.compareAndSetInt(NODE_ASLEEP_OFFSET, 1, 0);
    }

    /** After writing an event: whether the application's agent sleeps and this writer must ring (clears the flag). */
    public boolean takeAppAsleep() {
        VarHandle.fullFence();
        return header.getIntVolatile(APP_ASLEEP_OFFSET) == 1 && header.compareAndSetInt(APP_ASLEEP_OFFSET, 1, 0);
    }

    /** The application: a thread will sleep until the word at {@code address} changes (0: no thread waits so). */
    public void watchAddress(long address) {
        header.putLongVolatile(WATCHED_ADDRESS_OFFSET, address);
    }

    /** The node: the word an application thread sleeps on, or 0. */
    public long watchedAddress() {
        return header.getLongVolatile(WATCHED_ADDRESS_OFFSET);
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
        SharedFiles.deleteQuietly(path);
    }
}
