package io.pagewire.node.loop;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.netty.shaded.io.netty.bootstrap.ServerBootstrap;
import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandlerContext;
import io.grpc.netty.shaded.io.netty.channel.ChannelInboundHandlerAdapter;
import io.grpc.netty.shaded.io.netty.channel.ChannelInitializer;
import io.grpc.netty.shaded.io.netty.channel.EventLoop;
import io.grpc.netty.shaded.io.netty.util.ReferenceCountUtil;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class LoopDutyCycleTest {
    /**
     * A session's ring reader that keeps polling (an application posting without pause, or a reader in
     * its spin) must not keep the loop from its sockets: the lanes' packets and acknowledgements arrive
     * there. Before the duty cycle, a reader re-queued itself as a task, and Netty runs the tasks added
     * during a pass for up to a second before it reads a socket again.
     */
    @ParameterizedTest(name = "busyPollNs={0}")
    @ValueSource(longs = {0, 50_000})
    @Timeout(30)
    void aPollerThatNeverRestsLeavesTheSocketsReadBetweenItsTurns(long busyPollNs) throws Exception {
        try (NodeEventLoops loops = new NodeEventLoops("duty-test", 1, busyPollNs)) {
            EventLoop loop = loops.workers().next();
            AtomicLong turns = new AtomicLong();
            CompletableFuture<Long> readAtTurn = new CompletableFuture<>();
            CompletableFuture<Void> accepted = new CompletableFuture<>();
            Channel server = new ServerBootstrap().group(loop).channel(loops.serverChannelType())
                    .childHandler(new ChannelInitializer<>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    accepted.complete(null);
                                    ctx.fireChannelActive();
                                }

                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ReferenceCountUtil.release(msg);
                                    readAtTurn.complete(turns.get());
                                }
                            });
                        }
                    })
                    .bind(new InetSocketAddress("127.0.0.1", 0)).syncUninterruptibly().channel();
            try (Socket client = new Socket()) {
                client.connect(server.localAddress());
                client.setTcpNoDelay(true);
                accepted.get(10, TimeUnit.SECONDS); // the connection is accepted and registered on the loop
                CompletableFuture<Void> polling = new CompletableFuture<>();
                loop.execute(() -> {
                    LoopDutyCycle cycle = LoopDutyCycle.onThisLoop();
                    if (cycle == null) {
                        polling.completeExceptionally(new AssertionError("the node's loop runs no duty cycle"));
                        return;
                    }
                    LoopDutyCycle.Poller forever = new LoopDutyCycle.Poller() {
                        @Override
                        public void poll() {
                            turns.incrementAndGet();
                            if (!readAtTurn.isDone()) {
                                cycle.again(this);
                            }
                        }
                    };
                    cycle.again(forever);
                    polling.complete(null);
                });
                polling.get(10, TimeUnit.SECONDS);
                while (turns.get() < 1000) {
                    Thread.onSpinWait(); // the poller has the loop to itself for a while
                }
                OutputStream out = client.getOutputStream();
                out.write(1);
                out.flush();
                // Counted once the write returned: a turn count read before it would also count the
                // turns taken while this thread waited for a core between the two (4,098 once in CI).
                long writtenAtTurn = turns.get();
                long readAt = readAtTurn.get(20, TimeUnit.SECONDS);
                // The byte is in the loop's socket when write() returns (loopback); each pass reads the
                // sockets, so it is read within a few turns (or already was). (A task that re-queues
                // itself would turn for a second of passes, hundreds of thousands, first.)
                assertThat(readAt - writtenAtTurn).as("poller turns between the write and the read").isLessThan(1000);
            } finally {
                server.close().syncUninterruptibly();
            }
        }
    }

    @Test
    @Timeout(30)
    void tasksAndPollersBothRunWhileAPollerKeepsAskingForTurns() throws Exception {
        try (NodeEventLoops loops = new NodeEventLoops("duty-test", 1, 0)) {
            EventLoop loop = loops.workers().next();
            AtomicLong turns = new AtomicLong();
            CompletableFuture<Void> stop = new CompletableFuture<>();
            loop.execute(() -> {
                LoopDutyCycle cycle = LoopDutyCycle.onThisLoop();
                cycle.again(new LoopDutyCycle.Poller() {
                    @Override
                    public void poll() {
                        turns.incrementAndGet();
                        if (!stop.isDone()) {
                            cycle.again(this);
                        }
                    }
                });
            });
            // The poller turns once the task pass that registered it has ended. (Not counted after the
            // tasks below: Netty runs the tasks queued during a pass in that pass, for up to its time
            // quantum, so a test thread that queues its next task quickly can keep one pass going
            // through all hundred, 58 times in 300 on a loaded machine.)
            awaitTurnsBeyond(turns, 0);
            for (int i = 0; i < 100; i++) {
                CompletableFuture<Long> ran = new CompletableFuture<>();
                loop.execute(() -> ran.complete(turns.get()));
                // Counted once the task is queued (read before execute, the count also took in the
                // turns while this thread waited for a core: 8,713 on a loaded machine).
                long queuedAtTurn = turns.get();
                assertThat(ran.get(10, TimeUnit.SECONDS) - queuedAtTurn).as("poller turns before the task ran").isLessThan(1000);
            }
            awaitTurnsBeyond(turns, turns.get()); // and it still turns after them
            stop.complete(null);
        }
    }

    private static void awaitTurnsBeyond(AtomicLong turns, long count) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (turns.get() <= count) {
            assertThat(System.nanoTime()).as("the poller's turns pass %d within 10 s", count).isLessThan(deadline);
            Thread.sleep(1);
        }
    }

    @Test
    @Timeout(30)
    void aPollerThatThrowsIsLoggedAndTheLoopGoesOn() throws Exception {
        try (NodeEventLoops loops = new NodeEventLoops("duty-test", 1, 0)) {
            EventLoop loop = loops.workers().next();
            loop.execute(() -> LoopDutyCycle.onThisLoop().again(() -> {
                throw new IllegalStateException("a poller's bug (expected by the test)");
            }));
            CompletableFuture<Boolean> after = new CompletableFuture<>();
            loop.schedule(() -> after.complete(true), 10, TimeUnit.MILLISECONDS);
            assertThat(after.get(10, TimeUnit.SECONDS)).isTrue();
        }
    }
}
