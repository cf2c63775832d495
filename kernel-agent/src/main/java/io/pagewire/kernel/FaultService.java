package io.pagewire.kernel;

import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * The asynchronous fault queue through which a NIC raises page faults (on-demand paging): the NIC
 * posts a fault and carries on with other work; a fault-handler thread makes the page resident and
 * completes the fault. Faults on a page already queued are merged into the queued one. Several
 * handler threads serve faults on different pages at once, as a driver's page-fault work queue
 * does, so that the swap device's queue depth is used: each waits on the device with the kernel
 * lock released.
 *
 * <p>Completions run on a fault-handler thread without the kernel lock, concurrently with others; a
 * NIC's completion handler must only resume its own work (re-translate, retransmit), never block.
 */
public final class FaultService implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(FaultService.class.getName());

    /** Page keys to serve, and tasks to run in turn with them. */
    private final BlockingQueue<Object> queue = new LinkedBlockingQueue<>();
    private final Map<PageKey, Pending> pending = new ConcurrentHashMap<>();
    private final Thread[] handlers;
    private volatile boolean closed;

    /** @param handlerThreads how many faults are served at once (at least one) */
    FaultService(String name, int handlerThreads) {
        if (handlerThreads < 1) {
            throw new IllegalArgumentException("a fault service needs at least one handler thread, not " + handlerThreads);
        }
        handlers = new Thread[handlerThreads];
        for (int i = 0; i < handlerThreads; i++) {
            handlers[i] = new Thread(this::run, "pagewire-fault-handler-" + name + "-" + i);
            handlers[i].setDaemon(true);
            handlers[i].start();
        }
    }

    /**
     * Queues a page fault on one page of an address space.
     *
     * @return completes with how the fault was served, or exceptionally with the kernel's error
     *     ({@link BadAddressException}, {@link MemoryExhaustedException}, ...)
     */
    public CompletableFuture<PageFault> submit(AddressSpace space, long vpn, boolean write) {
        if (closed) {
            return CompletableFuture.failedFuture(new KernelException("fault service is closed"));
        }
        PageKey key = new PageKey(space, vpn);
        Pending fresh = new Pending(write);
        Pending queued = pending.putIfAbsent(key, fresh);
        if (queued != null) {
            queued.write |= write;
            return queued.future;
        }
        queue.add(key);
        return fresh.future;
    }

    /**
     * Runs a task on a fault-handler thread, once one takes it from the queue. The kernel uses it to
     * tell NICs of outcomes decided under the kernel lock, which NIC handlers must not run under.
     */
    public void execute(Runnable task) {
        queue.add(task);
    }

    /** Faults queued or being served. */
    public int depth() {
        return pending.size();
    }

    @Override
    public void close() {
        closed = true;
        for (Thread handler : handlers) {
            handler.interrupt();
        }
        try {
            for (Thread handler : handlers) {
                handler.join(5_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        KernelException error = new KernelException("fault service is closed");
        pending.forEach((key, p) -> p.future.completeExceptionally(error));
        pending.clear();
    }

    private void run() {
        while (!closed) {
            Object item;
            try {
                item = queue.take();
            } catch (InterruptedException e) {
                return;
            }
            if (item instanceof Runnable task) {
                try {
                    task.run();
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "a task on the fault-handler thread failed", e);
                }
                continue;
            }
            PageKey key = (PageKey) item;
            Pending p = pending.get(key);
            PageFault fault = null;
            Throwable error = null;
            try {
                fault = key.space().serviceNicFault(key.vpn(), p.write);
            } catch (RuntimeException e) {
                error = e;
            }
            // Later faults on this page must queue anew: the page may be gone again by then.
            pending.remove(key);
            try {
                if (error == null) {
                    p.future.complete(fault);
                } else {
                    p.future.completeExceptionally(error);
                }
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "a page fault completion handler failed", e);
            }
        }
    }

    private static final class Pending {
        final CompletableFuture<PageFault> future = new CompletableFuture<>();
        volatile boolean write;

        Pending(boolean write) {
            this.write = write;
        }
    }
}
