package io.pagewire.node.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionStatus;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicException;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.proto.fabric.Opcode;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import com.google.protobuf.ByteString;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Timeout;

/**
 * Bad input gets a clear error to whoever sent it, and the node keeps serving everyone else: a
 * bystander queue pair between the same nodes completes its work before and after every failure.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
abstract class ErrorHandlingSuite extends ClusterFixture {
    private static final int PAGE = 4096;

    private Connection bystander;
    private MemoryRegion bystanderSrc;
    private MemoryRegion bystanderDst;

    private Connection startWithBystander() throws Exception {
        start(2, context -> context.nic().ackTimeoutNs(20_000_000L).retryCount(3));
        bystander = connect(cluster.node(1), cluster.node(2));
        long src = bystander.local().space().allocate(PAGE);
        long dst = bystander.remote().space().allocate(PAGE);
        bystanderSrc = bystander.local().register(src, PAGE, RegistrationMode.PINNED, Access.all());
        bystanderDst = bystander.remote().register(dst, PAGE, RegistrationMode.ON_DEMAND, Access.all());
        bystanderStillServed();
        return connect(cluster.node(1), cluster.node(2));
    }

    private void bystanderStillServed() throws Exception {
        bystander.qp().post(WorkRequest.write(7, bystanderSrc.lkey(), bystanderSrc.address(), 64, bystanderDst.address(), bystanderDst.rkey()));
        assertThat(awaitSuccess(bystander.cq()).wrId()).isEqualTo(7);
    }

    private MemoryRegion source(Connection c) {
        long src = c.local().space().allocate(4 * PAGE);
        return c.local().register(src, 4 * PAGE, RegistrationMode.PINNED, Access.all());
    }

    private Completion failed(Connection c) throws Exception {
        Completion done = await(c.cq(), 30);
        assertThat(done.ok()).as("expected an error, got %s", done).isFalse();
        return done;
    }

    @Test
    void anUnknownRkeyIsARemoteAccessErrorThatNamesTheKey() throws Exception {
        Connection c = startWithBystander();
        MemoryRegion src = source(c);
        long bogus = 0x1f2eL;
        c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), 10, 0x1000_0000L, bogus));
        c.qp().post(WorkRequest.write(2, src.lkey(), src.address(), 10, 0x1000_0000L, bogus));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(done.error()).contains("rkey 0x1f2e is not registered on " + c.remote() + " of node node-2");
        Completion flushed = await(c.cq(), 10);
        assertThat(flushed.wrId()).isEqualTo(2);
        assertThat(flushed.status()).isEqualTo(CompletionStatus.FLUSHED);
        assertThat(c.qp().state()).isEqualTo(QueuePair.State.ERROR);
        c.qp().post(WorkRequest.write(3, src.lkey(), src.address(), 10, 0x1000_0000L, bogus));
        assertThat(await(c.cq(), 10).error()).contains("after an earlier failure");
        bystanderStillServed();
    }

    @Test
    void anAddressOutsideTheRegionIsRefused() throws Exception {
        Connection c = startWithBystander();
        MemoryRegion src = source(c);
        long dst = c.remote().space().allocate(2 * PAGE);
        MemoryRegion dstRegion = c.remote().register(dst, PAGE, RegistrationMode.ON_DEMAND, Access.all());
        c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), 100, dst + PAGE - 50, dstRegion.rkey()));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(done.error()).contains(String.format("range 0x%x+100 is outside", dst + PAGE - 50));
        bystanderStillServed();
    }

    @Test
    void aMissingAccessRightIsRefused() throws Exception {
        Connection c = startWithBystander();
        MemoryRegion src = source(c);
        long dst = c.remote().space().allocate(PAGE);
        MemoryRegion readOnly = c.remote().register(dst, PAGE, RegistrationMode.PINNED, EnumSet.of(Access.REMOTE_READ));
        c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), 8, dst, readOnly.rkey()));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(done.error()).contains("does not allow REMOTE_WRITE");
        bystanderStillServed();
    }

    @Test
    void anUnknownOrForbiddenEventCounterIsRefused() throws Exception {
        Connection c = startWithBystander();
        c.qp().post(WorkRequest.fetchAdd(1, 999, 1));
        assertThat(failed(c).error()).contains("event counter 999 on " + c.remote() + " does not exist");
        Connection d = connect(cluster.node(1), cluster.node(2));
        EventCounter notifyOnly = d.remote().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        d.qp().post(WorkRequest.fetchAdd(1, notifyOnly.id(), 1));
        assertThat(failed(d).error()).contains("does not allow FETCH_ADD (REMOTE_ATOMIC)");
        assertThat(notifyOnly.value()).isZero();
        bystanderStillServed();
    }

    @Test
    void localMistakesAreRefusedWhenPosted() throws Exception {
        Connection c = startWithBystander();
        MemoryRegion src = source(c);
        assertThatThrownBy(() -> c.qp().post(WorkRequest.write(1, 4242, src.address(), 8, 0, 0)))
                .isInstanceOf(NicException.class).hasMessageContaining("lkey 4242 is not registered on endpoint " + c.local().id());
        assertThatThrownBy(() -> c.qp().post(WorkRequest.write(1, src.lkey(), src.address() + 4 * PAGE - 4, 8, 0, 0)))
                .isInstanceOf(NicException.class).hasMessageContaining("is outside");
        assertThatThrownBy(() -> c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), -1, 0, 0)))
                .isInstanceOf(NicException.class).hasMessageContaining("length must be 0 to");
        MemoryRegion noLocalWrite = c.local().register(src.address(), PAGE, RegistrationMode.PINNED, EnumSet.of(Access.REMOTE_READ));
        assertThatThrownBy(() -> c.qp().post(WorkRequest.read(1, noLocalWrite.lkey(), src.address(), 8, 0, 1)))
                .isInstanceOf(NicException.class).hasMessageContaining("lacks LOCAL_WRITE");
        assertThat(c.qp().state()).as("a refused post leaves the queue pair usable").isEqualTo(QueuePair.State.READY);
        bystanderStillServed();
    }

    @Test
    void memoryFreedUnderARegisteredRegionFailsLaterRequestsClearly() throws Exception {
        Connection c = startWithBystander();
        MemoryRegion src = source(c);
        long dst = c.remote().space().allocate(PAGE);
        MemoryRegion dstRegion = c.remote().register(dst, PAGE, RegistrationMode.PINNED, Access.all());
        c.remote().space().free(dst);
        assertThat(dstRegion.invalidReason()).contains("freed");
        c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), 8, dst, dstRegion.rkey()));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(done.error()).contains("no longer usable").contains("freed");
        assertThat(cluster.node(2).kernel().stats().pinnedPages()).as("pins of freed memory are revoked").isZero();

        Connection d = connect(cluster.node(1), cluster.node(2));
        MemoryRegion local = source(d);
        d.local().space().free(local.address());
        assertThatThrownBy(() -> d.qp().post(WorkRequest.write(1, local.lkey(), local.address(), 8, 0, 1)))
                .isInstanceOf(NicException.class).hasMessageContaining("freed");
        bystanderStillServed();
    }

    @Test
    void aReceiverThatCannotFaultThePageInRefusesInsteadOfStallingForever() throws Exception {
        start(2, context -> {
            if (context.nodeId().equals("node-2")) {
                context.kernel().physicalMemoryBytes(1L << 20).swapBytes(0);
            }
        });
        bystander = null;
        Connection c = connect(cluster.node(1), cluster.node(2));
        // Fill the responder's memory with dirty pages that cannot go anywhere (no swap).
        long hog = c.remote().space().allocate(1L << 20);
        c.remote().space().store(hog, new byte[1 << 20], 0, 1 << 20);
        long dst = c.remote().space().allocate(PAGE);
        MemoryRegion dstRegion = c.remote().register(dst, PAGE, RegistrationMode.ON_DEMAND, Access.all());
        MemoryRegion src = source(c);
        c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), 8, dst, dstRegion.rkey()));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.REMOTE_OPERATIONAL_ERROR);
        assertThat(done.error()).contains("a page fault on the destination failed").contains("out of memory");
        assertThat(cluster.node(2).nic().counters().get(NicCounter.RECEIVE_FAULTS_FAILED)).isPositive();
    }

    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"SHADOW", "ON_DEMAND"})
    void aReadWhoseSourceCannotBeFaultedInEndsWithAnErrorInsteadOfRnrForever(RegistrationMode mode) throws Exception {
        start(2, context -> {
            if (context.nodeId().equals("node-2")) {
                context.kernel().physicalMemoryBytes(1L << 20).swapBytes(0);
            }
        });
        bystander = null;
        Connection c = connect(cluster.node(1), cluster.node(2));
        long source = c.remote().space().allocate(PAGE);
        MemoryRegion sourceRegion = c.remote().register(source, PAGE, mode, Access.all());
        // Fill the responder's memory with dirty pages that cannot go anywhere (no swap): the source page, never touched, has no frame to get.
        long hog = c.remote().space().allocate(1L << 20);
        c.remote().space().store(hog, new byte[1 << 20], 0, 1 << 20);
        MemoryRegion into = source(c);
        c.qp().post(WorkRequest.read(1, into.lkey(), into.address(), 8, source, sourceRegion.rkey()));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.REMOTE_OPERATIONAL_ERROR);
        assertThat(done.error()).contains("a page fault on the READ's source failed").contains("out of memory");
    }

    @Test
    void rnrRetriesRunOutWithAClearError() throws Exception {
        start(2, context -> context.nic().rnrRetryCount(0));
        Connection c = connect(cluster.node(1), cluster.node(2));
        long dst = c.remote().space().allocate(PAGE);
        MemoryRegion dstRegion = c.remote().register(dst, PAGE, RegistrationMode.ON_DEMAND, Access.all());
        MemoryRegion src = source(c);
        c.qp().post(WorkRequest.write(1, src.lkey(), src.address(), 8, dst, dstRegion.rkey()));
        Completion done = failed(c);
        assertThat(done.status()).isEqualTo(CompletionStatus.RNR_RETRY_EXCEEDED);
        assertThat(done.error()).contains("answered RNR NAK").contains("pagewire.nic.rnrRetryCount");
    }

    @Test
    void malformedPacketsAreRefusedAndTheResponderCarriesOn() throws Exception {
        Connection c = startWithBystander();
        PagewireNode responder = cluster.node(2);
        long dst = c.remote().space().allocate(PAGE);
        MemoryRegion dstRegion = c.remote().register(dst, PAGE, RegistrationMode.PINNED, Access.all());
        int toQp = c.remoteQp().qpn();
        int fromQp = c.qp().qpn();
        PacketBatch garbage = PacketBatch.newBuilder()
                .addPackets(Packet.newBuilder().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(0).setOpcode(Opcode.OPCODE_UNSPECIFIED))
                .addPackets(Packet.newBuilder().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(1).setOpcode(Opcode.WRITE_ONLY)
                        .setRkey(dstRegion.rkey()).setRemoteAddress(dst).setPayload(ByteString.copyFrom(new byte[100_000])))
                .addPackets(Packet.newBuilder().setDstQpn(9999).setSrcQpn(fromQp).setPsn(0).setOpcode(Opcode.WRITE_ONLY))
                .addPackets(Packet.newBuilder().setDstQpn(toQp).setSrcQpn(77).setPsn(0).setOpcode(Opcode.WRITE_ONLY))
                // PSNs of 2^63 and above (negative as a Java long) once indexed the replay cache out of bounds.
                .addPackets(Packet.newBuilder().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(-5).setOpcode(Opcode.FETCH_ADD))
                .addPackets(Packet.newBuilder().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(Long.MIN_VALUE).setOpcode(Opcode.READ_REQUEST).setLength(8)
                        .setRkey(dstRegion.rkey()).setRemoteAddress(dst))
                .build();
        // What the NIC logs with an exception attached: a malformed packet is a counted refusal or drop, never a crash.
        java.util.logging.Logger nicLog = java.util.logging.Logger.getLogger(io.pagewire.node.nic.Nic.class.getName());
        java.util.List<String> logged = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Handler capture = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord record) {
                if (record.getThrown() != null) {
                    logged.add(record.getMessage() + ": " + record.getThrown());
                }
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        nicLog.addHandler(capture);
        try {
            responder.nic().receive("node-1", garbage);
            responder.nic().receive("node-3", garbage);
        } finally {
            nicLog.removeHandler(capture);
        }
        assertThat(responder.nic().counters().get(NicCounter.INVALID_REQUEST_NAKS_SENT)).isPositive();
        assertThat(responder.nic().counters().get(NicCounter.DROPPED_PACKETS)).isGreaterThanOrEqualTo(2);
        assertThat(logged).as("nothing failed with an exception on the way").noneMatch(line -> line.contains("Exception"));
        bystanderStillServed();
    }
}
