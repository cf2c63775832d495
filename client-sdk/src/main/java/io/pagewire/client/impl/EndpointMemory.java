package io.pagewire.client.impl;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.pagewire.proto.verbs.AtomicWordRequest;
import io.pagewire.proto.verbs.AtomicWordResponse;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.LoadRequest;
import io.pagewire.proto.verbs.LoadResponse;
import io.pagewire.proto.verbs.StoreRequest;
import io.pagewire.proto.verbs.StoreResponse;
import io.pagewire.ring.RingIdler;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.LockSupport;

/**
 * An endpoint's memory as its application reaches it: straight through {@link CpuMemory} where the
 * node shares its memory with this process and the range lies in what the page table reaches, by the
 * node's store, load and atomic calls everywhere else. Waits on a word sleep on the session's bell
 * where they can, and poll by calls where they cannot.
 */
final class EndpointMemory {
    private final GrpcPagewire connection;
    private volatile EndpointRef ref;
    /** This process as the node's CPU (its memory mapped), or null: store, load and waits are calls. */
    private volatile CpuMemory cpu;
    private volatile RingClient rings;

    EndpointMemory(GrpcPagewire connection) {
        this.connection = connection;
    }

    /** The session opened: calls name this endpoint. */
    void opened(EndpointRef endpoint) {
        ref = endpoint;
    }

    /** The session moved to rings, with the node's memory mapped ({@code mapped}) or not (null). */
    void direct(CpuMemory mapped, RingClient sessionRings) {
        rings = sessionRings;
        cpu = mapped;
    }

    boolean sharesMemory() {
        return cpu != null;
    }

    /** This process as the node's CPU for [address, +length), or null when those pages are reached by calls. */
    private CpuMemory cpuFor(long address, long length) {
        CpuMemory c = cpu;
        return c != null && c.covers(address, Math.max(1, length)) ? c : null;
    }

    void store(long address, byte[] data) {
        CpuMemory c = cpuFor(address, data.length);
        if (c != null) {
            c.store(address, data, 0, data.length);
        } else {
            connection.join(storeAsync(address, data));
        }
    }

    void store(long address, ByteBuffer src) {
        CpuMemory c = cpuFor(address, src.remaining());
        if (c != null) {
            c.store(address, src);
        } else {
            connection.join(Calls.<StoreResponse>unary(o -> connection.stub().store(StoreRequest.newBuilder()
                    .setEndpoint(ref).setAddress(address).setData(ByteString.copyFrom(src)).build(), o)));
        }
    }

    void load(long address, ByteBuffer dst) {
        CpuMemory c = cpuFor(address, dst.remaining());
        if (c != null) {
            c.load(address, dst);
        } else {
            dst.put(load(address, dst.remaining()));
        }
    }

    long loadLong(long address) {
        CpuMemory c = cpuFor(address, 8);
        if (c != null) {
            return c.loadLong(address);
        }
        requireAligned(address);
        return ByteBuffer.wrap(load(address, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    void storeLong(long address, long value) {
        CpuMemory c = cpuFor(address, 8);
        if (c != null) {
            c.storeLong(address, value);
        } else {
            requireAligned(address);
            store(address, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, value).array());
        }
    }

    long compareAndSwapLong(long address, long expected, long value) {
        CpuMemory c = cpuFor(address, 8);
        return c != null ? c.compareAndSwapLong(address, expected, value)
                : atomicWord(address, AtomicWordRequest.Op.COMPARE_SWAP, expected, value);
    }

    long fetchAddLong(long address, long delta) {
        CpuMemory c = cpuFor(address, 8);
        return c != null ? c.fetchAddLong(address, delta) : atomicWord(address, AtomicWordRequest.Op.FETCH_ADD, delta, 0);
    }

    private long atomicWord(long address, AtomicWordRequest.Op op, long operand, long swap) {
        return connection.join(Calls.<AtomicWordResponse>unary(o -> connection.stub().atomicWord(AtomicWordRequest.newBuilder().setEndpoint(ref)
                .setAddress(address).setOp(op).setOperand(operand).setSwap(swap).build(), o))).getBefore();
    }

    private static void requireAligned(long address) {
        if ((address & 7) != 0) {
            throw new IllegalArgumentException(String.format("a word access needs an 8-byte aligned address, not 0x%x", address));
        }
    }

    long awaitChange(long address, long value, Duration timeout) {
        long deadlineNs = System.nanoTime() + Math.min(timeout.toNanos(), Long.MAX_VALUE / 4);
        CpuMemory c = cpuFor(address, 8);
        RingClient r = rings;
        if (c == null || r == null) {
            return pollChange(address, value, deadlineNs);
        }
        boolean busy = connection.options().busyPoll();
        long spinUntil = System.nanoTime() + Errors.SPIN_NS;
        while (true) {
            long now = c.loadLong(address);
            long t = System.nanoTime();
            if (now != value || t - deadlineNs >= 0) {
                return now;
            }
            if (busy) {
                // Spinning, then yielding between looks: a waiter that never yields starves, on a
                // small machine, the node threads that bring the write it waits for.
                RingIdler.backOff(spinUntil);
                continue;
            }
            if (t - spinUntil < 0) {
                Thread.onSpinWait();
                continue;
            }
            // Asleep until the node places data over the word (its bell), or the ring's sleep limit.
            r.watchAddress(address);
            try {
                r.await(() -> c.peekLong(address, ~value) != value, deadlineNs);
            } finally {
                r.watchAddress(0);
            }
        }
    }

    /** A wait on memory without the node's memory mapped: loads, further and further apart (up to 1 ms). */
    private long pollChange(long address, long value, long deadlineNs) {
        long pauseNs = 10_000;
        while (true) {
            long now = loadLong(address);
            long left = deadlineNs - System.nanoTime();
            if (now != value || left <= 0) {
                return now;
            }
            LockSupport.parkNanos(Math.min(pauseNs, left));
            pauseNs = Math.min(pauseNs * 2, 1_000_000);
        }
    }

    CompletableFuture<Void> storeAsync(long address, byte[] data) {
        CpuMemory c = cpuFor(address, data.length);
        if (c != null) {
            try {
                c.store(address, data, 0, data.length);
                return CompletableFuture.completedFuture(null);
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }
        return Calls.<StoreResponse>unary(o -> connection.stub().store(StoreRequest.newBuilder()
                .setEndpoint(ref).setAddress(address).setData(UnsafeByteOperations.unsafeWrap(data)).build(), o)).thenApply(r -> null);
    }

    byte[] load(long address, int length) {
        CpuMemory c = cpuFor(address, length);
        if (c != null && length >= 0) {
            byte[] data = new byte[length];
            c.load(address, data, 0, length);
            return data;
        }
        return connection.join(loadAsync(address, length));
    }

    CompletableFuture<byte[]> loadAsync(long address, int length) {
        CpuMemory c = cpuFor(address, length);
        if (c != null && length >= 0) {
            try {
                byte[] data = new byte[length];
                c.load(address, data, 0, length);
                return CompletableFuture.completedFuture(data);
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }
        return Calls.<LoadResponse>unary(o -> connection.stub().load(
                LoadRequest.newBuilder().setEndpoint(ref).setAddress(address).setLength(length).build(), o))
                .thenApply(r -> r.getData().toByteArray());
    }
}
