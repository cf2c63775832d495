package io.pagewire.systemtests;

import static io.pagewire.node.TestData.awaitTrue;
import static io.pagewire.systemtests.ClusterChecks.total;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QpAddress;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.WorkRequest;
import io.pagewire.proto.verbs.AllocateRequest;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.VerbsGrpc;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import io.pagewire.testkit.WithSettings;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every error path through the SDK, on a fresh two-node cluster per test: a typed exception whose
 * message says what to fix, and the node carries on. Each binding says where the nodes run and how
 * its applications connect.
 */
abstract class SdkErrorsSuite {
    private Endpoint a;
    private Endpoint b;
    private MemoryRegion src;
    private QueuePair qp;
    private QueuePair bystander;
    private MemoryRegion bystanderSource;
    private MemoryRegion bystanderTarget;

    /** Two default test nodes; tests that need more say so with {@link WithSettings}. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.nic.ackTimeoutNs", "50ms");
    }

    /** How the suite's applications reach their nodes (by default as the SDK chooses: rings when co-located). */
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults();
    }

    private void startPair(PagewireCluster cluster) {
        a = cluster.node(1).connect(connectOptions()).openEndpoint("a");
        b = cluster.node(2).connect(connectOptions()).openEndpoint("b");
        long address = a.allocate(1 << 20);
        src = a.register(address, 1 << 20, RegistrationMode.PINNED, Access.all());
        qp = a.connect(b);
        Endpoint from = cluster.node(1).connect(connectOptions()).openEndpoint("bystander-from");
        Endpoint to = cluster.node(2).connect(connectOptions()).openEndpoint("bystander-to");
        bystanderSource = from.register(from.allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
        bystanderTarget = to.register(to.allocate(4096), 4096, RegistrationMode.ON_DEMAND, Access.all());
        bystander = from.connect(to);
        bystanderStillServed();
    }

    /** Another application's queue pair between the same nodes completes its work before and after each failure. */
    private void bystanderStillServed() {
        assertThat(bystander.await(bystander.write(bystanderSource, bystanderSource.address(), 64,
                bystanderTarget.address(), bystanderTarget.rkey())).bytes()).isEqualTo(64);
    }

    @Test
    void anUnknownRkeyIsARemoteAccessError(PagewireCluster cluster) {
        startPair(cluster);
        long dst = b.allocate(4096);
        assertThatThrownBy(() -> qp.await(qp.write(src, src.address(), 8, dst, 0x1f2eL)))
                .isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("REMOTE_ACCESS_ERROR")
                .hasMessageContaining("rkey 0x1f2e is not registered on endpoint " + b.id());
        assertThatThrownBy(() -> qp.await(qp.write(src, src.address(), 8, dst, 0x1f2eL)))
                .as("an RC queue pair flushes after an error").isInstanceOf(PagewireException.FlushedException.class);
        QueuePair fresh = a.connect(b);
        MemoryRegion dstRegion = b.register(dst, 4096, RegistrationMode.PINNED, Access.all());
        fresh.await(fresh.write(src, src.address(), 8, dst, dstRegion.rkey()));
        bystanderStillServed();
    }

    @Test
    void anUnsignalledRequestThatFailsStillCompletesAndSettlesTheOnesBeforeIt(PagewireCluster cluster) {
        startPair(cluster);
        long dst = b.allocate(4096);
        MemoryRegion dstRegion = b.register(dst, 4096, RegistrationMode.PINNED, Access.all());
        List<CompletableFuture<Completion>> done = qp.post(List.of(
                WorkRequest.write(src, src.address(), 8, dst, dstRegion.rkey()).unsignaled(),
                WorkRequest.write(src, src.address(), 8, dst, 0x1f2eL).unsignaled(),
                WorkRequest.write(src, src.address(), 8, dst, dstRegion.rkey()).unsignaled()));
        assertThat(qp.await(done.get(0)).bytes()).as("the failure after it implies that it succeeded").isEqualTo(8);
        assertThatThrownBy(() -> qp.await(done.get(1)))
                .isInstanceOf(PagewireException.RemoteAccessException.class).hasMessageContaining("rkey 0x1f2e");
        assertThatThrownBy(() -> qp.await(done.get(2)))
                .as("flushed requests complete whether signalled or not").isInstanceOf(PagewireException.FlushedException.class);
    }

    @Test
    void anAddressOutsideTheRegionIsARemoteAccessError(PagewireCluster cluster) {
        startPair(cluster);
        long dst = b.allocate(8192);
        MemoryRegion dstRegion = b.register(dst, 4096, RegistrationMode.ON_DEMAND, Access.all());
        assertThatThrownBy(() -> qp.await(qp.write(src, src.address(), 100, dst + 4090, dstRegion.rkey())))
                .isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining(String.format("range 0x%x+100 is outside", dst + 4090));
    }

    @Test
    void aMissingAccessRightIsARemoteAccessError(PagewireCluster cluster) {
        startPair(cluster);
        long dst = b.allocate(4096);
        MemoryRegion readOnly = b.register(dst, 4096, RegistrationMode.SHADOW, EnumSet.of(Access.REMOTE_READ));
        assertThatThrownBy(() -> qp.await(qp.write(src, src.address(), 8, dst, readOnly.rkey())))
                .isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("does not allow REMOTE_WRITE");
        bystanderStillServed();
    }

    @Test
    void anUnknownOrForbiddenEventCounterIsRefused(PagewireCluster cluster) {
        startPair(cluster);
        assertThatThrownBy(() -> qp.await(qp.fetchAdd(999, 1)))
                .isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("event counter 999 on endpoint " + b.id()).hasMessageContaining("does not exist");
        QueuePair fresh = a.connect(b);
        EventCounter notifyOnly = b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        assertThatThrownBy(() -> fresh.await(fresh.fetchAdd(notifyOnly.id(), 1)))
                .isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("does not allow FETCH_ADD (REMOTE_ATOMIC)");
        assertThat(notifyOnly.value()).isZero();
        bystanderStillServed();
    }

    @Test
    void memoryFreedUnderARegisteredRegionFailsLaterRequestsAndRevokesItsPins(PagewireCluster cluster) {
        startPair(cluster);
        Pagewire node2 = cluster.node(2).connect();
        double pinnedBefore = total(node2, "pagewire_memory_pages", "state=pinned");
        long dst = b.allocate(4 * 4096);
        MemoryRegion dstRegion = b.register(dst, 4 * 4096, RegistrationMode.PINNED, Access.all());
        assertThat(total(node2, "pagewire_memory_pages", "state=pinned")).isEqualTo(pinnedBefore + 4);
        b.free(dst);
        assertThat(total(node2, "pagewire_memory_pages", "state=pinned")).as("pins of freed memory are revoked").isEqualTo(pinnedBefore);
        assertThatThrownBy(() -> qp.await(qp.write(src, src.address(), 8, dst, dstRegion.rkey())))
                .isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("no longer usable").hasMessageContaining("freed");
        bystanderStillServed();
    }

    @Test
    void localMistakesAreRefusedWithTheReason(PagewireCluster cluster) {
        startPair(cluster);
        assertThatThrownBy(() -> qp.await(qp.write(src, src.address() + (1 << 20) - 4, 8, 0, 1)))
                .isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("is outside");
        assertThatThrownBy(() -> a.load(0x10, 8)).isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("is not allocated in endpoint " + a.id());
        assertThatThrownBy(() -> a.register(0x10, 4096, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PagewireException.InvalidRequestException.class);
        long huge = a.allocate(1L << 30);
        assertThatThrownBy(() -> a.register(huge, 1L << 30, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageStartingWith("memlock limit 128 MiB exceeded: endpoint " + a.id() + " would pin 1025 MiB (1 MiB pinned now, 1 GiB more requested)");
        assertThat(a.createEventCounter(Access.all()).awaitAsync(1, Duration.ofMillis(1)).join())
                .as("a wait that times out is not an error: it returns the value").isZero();
        bystanderStillServed();
    }

    @Test
    @WithSettings({"pagewire.nic.rnrDelayNs=5s", "pagewire.nic.ackTimeoutNs=3s"})
    void aRegionFreedUnderAPostedRequestFailsItClearly(PagewireCluster cluster) throws Exception {
        startPair(cluster);
        // Never touched: the first packet is answered RNR NAK, and the requester waits 5 s before it sends
        // again. The fault brings the whole megabyte in at once, so that one back-off is all the time the
        // test has to free the source (300 ms was too little in CI once a write no longer took a NAK per
        // page), and the acknowledgement timeout must not resend first: on a fresh container cluster it
        // fired twice, at the default 200 ms, before the NAK took hold, and the write was done before the free.
        long dst = b.allocate(1 << 20);
        MemoryRegion dstRegion = b.register(dst, 1 << 20, RegistrationMode.ON_DEMAND, Access.all());
        CompletableFuture<Completion> write = qp.write(src, src.address(), 1 << 20, dst, dstRegion.rkey());
        Pagewire node1 = cluster.node(1).connect();
        awaitTrue(() -> total(node1, "pagewire_rnr_naks_received_total") > 0, 10_000, "the first RNR NAK");
        // While the requester waits out the RNR delay, its source memory goes away.
        a.free(src.address());
        assertThatThrownBy(() -> qp.await(write))
                .isInstanceOf(PagewireException.LocalProtectionException.class)
                .hasMessageContaining("its memory was freed while it was registered");
    }

    @Test
    @WithSettings({"pagewire.nic.ackTimeoutNs=20ms", "pagewire.nic.retryCount=3"})
    void aDisconnectedApplicationsEndpointIsGoneAndItsPeersTimeOut(PagewireCluster cluster) throws Exception {
        startPair(cluster);
        Pagewire node2 = cluster.node(2).connect();
        Pagewire third = cluster.node(2).connect(connectOptions());
        Endpoint doomed = third.openEndpoint("doomed");
        long dst = doomed.allocate(4096);
        MemoryRegion dstRegion = doomed.register(dst, 4096, RegistrationMode.PINNED, Access.all());
        QueuePair toDoomed = a.connect(doomed);
        toDoomed.await(toDoomed.write(src, src.address(), 8, dst, dstRegion.rkey()));
        double sessionsBefore = total(node2, "pagewire_sessions");
        third.close();
        awaitTrue(() -> total(node2, "pagewire_sessions") == sessionsBefore - 1, 10_000, "the node ended the session");
        assertThat(total(node2, "pagewire_memory_pages", "state=pinned")).isZero();
        assertThatThrownBy(() -> toDoomed.await(toDoomed.write(src, src.address(), 8, dst, dstRegion.rkey())))
                .isInstanceOf(PagewireException.RetryExceededException.class)
                .hasMessageContaining("no acknowledgement from queue pair");
        assertThatThrownBy(() -> doomed.allocate(10)).isInstanceOf(PagewireException.class);
    }

    @Test
    void anotherSessionsEndpointCannotBeUsedAndAnUnknownOneIsNotFound(PagewireCluster cluster) throws Exception {
        startPair(cluster);
        ManagedChannel channel = cluster.openChannel(cluster.node(1));
        try {
            VerbsGrpc.VerbsBlockingStub raw = VerbsGrpc.newBlockingStub(channel);
            assertThatThrownBy(() -> raw.allocate(AllocateRequest.newBuilder()
                    .setEndpoint(EndpointRef.newBuilder().setEndpointId(a.id()).setSessionKey(12345)).setLength(10).build()))
                    .isInstanceOf(StatusRuntimeException.class)
                    .hasMessage("PERMISSION_DENIED: endpoint " + a.id() + " on node node-1 belongs to another session; use the key its SessionOpened carried");
            assertThatThrownBy(() -> raw.allocate(AllocateRequest.newBuilder()
                    .setEndpoint(EndpointRef.newBuilder().setEndpointId(999)).setLength(10).build()))
                    .hasMessageStartingWith("NOT_FOUND: endpoint 999 is not open on node node-1");
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        assertThat(a.allocate(10)).as("the owner still works").isPositive();
    }

    @Test
    void hugeLoadLengthsAndHugeInputsGetAClearErrorAndTheConnectionCarriesOn(PagewireCluster cluster) {
        startPair(cluster);
        long address = a.allocate(4096);
        // Lengths of 2^31 and 2^32 - 1 on the wire (uint32) once answered INTERNAL: NegativeArraySizeException.
        for (int length : new int[] {-1, Integer.MIN_VALUE}) {
            assertThatThrownBy(() -> a.load(address, length)).as("length " + Integer.toUnsignedString(length))
                    .isInstanceOf(PagewireException.InvalidRequestException.class).hasMessageContaining("a load takes at most");
        }
        // An error that quoted a 200 KB input whole overflowed the response trailers and broke the connection's other calls.
        QueuePair fresh = a.createQueuePair();
        String hugeId = "x".repeat(200_000);
        assertThatThrownBy(() -> fresh.connect(new QpAddress(hugeId, 5, 32, 4096)))
                .isInstanceOf(PagewireException.InvalidRequestException.class)
                .satisfies(e -> assertThat(e.getMessage().length()).as("a bounded description").isLessThan(4096))
                .hasMessageContaining("more characters");
        assertThat(a.allocate(10)).as("the same connection still serves").isPositive();
    }

    /** One page on node-1 to write from, an endpoint on node-2, and a queue pair between them. */
    private record Small(Endpoint local, Endpoint target, MemoryRegion source, QueuePair qp) {
        CompletableFuture<Completion> write(QueuePair on, long dst, long rkey) {
            return on.write(source, source.address(), 8, dst, rkey);
        }
    }

    private Small smallPair(PagewireCluster cluster) {
        Endpoint local = cluster.node(1).connect(connectOptions()).openEndpoint("small");
        Endpoint target = cluster.node(2).connect(connectOptions()).openEndpoint("target");
        long address = local.allocate(4096);
        MemoryRegion source = local.register(address, 4096, RegistrationMode.PINNED, Access.all());
        return new Small(local, target, source, local.connect(target));
    }

    @Test
    // One application fills the node: its share must be the whole node.
    @WithSettings({"pagewire.kernel.physicalMemoryBytes=1MiB", "pagewire.kernel.swapBytes=0", "pagewire.quota.callerShare=1"})
    void aReceiverThatCannotFaultThePageInRefusesInsteadOfStallingForever(PagewireCluster cluster) {
        Small p = smallPair(cluster);
        // Fill the responder's memory with dirty pages that cannot go anywhere (no swap).
        long hog = p.target().allocate(1L << 20);
        p.target().store(hog, new byte[1 << 20]);
        long dst = p.target().allocate(4096);
        MemoryRegion dstRegion = p.target().register(dst, 4096, RegistrationMode.ON_DEMAND, Access.all());
        assertThatThrownBy(() -> p.qp().await(p.write(p.qp(), dst, dstRegion.rkey())))
                .isInstanceOf(PagewireException.RemoteOperationException.class)
                .hasMessageContaining("a page fault on the destination failed").hasMessageContaining("out of memory");
        // Once memory is freed the same page faults in, and a new queue pair's write lands.
        p.target().free(hog);
        QueuePair fresh = p.local().connect(p.target());
        assertThat(fresh.await(p.write(fresh, dst, dstRegion.rkey())).bytes()).isEqualTo(8);
    }

    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"SHADOW", "ON_DEMAND"})
    // One application fills the node: its share must be the whole node.
    @WithSettings({"pagewire.kernel.physicalMemoryBytes=1MiB", "pagewire.kernel.swapBytes=0", "pagewire.quota.callerShare=1"})
    void aReadWhoseSourceCannotBeFaultedInEndsWithAnErrorInsteadOfRnrForever(RegistrationMode mode, PagewireCluster cluster) {
        Small p = smallPair(cluster);
        long source = p.target().allocate(4096);
        MemoryRegion sourceRegion = p.target().register(source, 4096, mode, Access.all());
        // Fill the responder's memory with dirty pages that cannot go anywhere (no swap): the source page, never touched, has no frame to get.
        long hog = p.target().allocate(1L << 20);
        p.target().store(hog, new byte[1 << 20]);
        assertThatThrownBy(() -> p.qp().await(p.qp().read(p.source(), p.source().address(), 8, source, sourceRegion.rkey())))
                .isInstanceOf(PagewireException.RemoteOperationException.class)
                .hasMessageContaining("a page fault on the READ's source failed").hasMessageContaining("out of memory");
    }

    @Test
    @WithSettings("pagewire.nic.rnrRetryCount=0")
    void rnrRetriesRunOutWithAClearError(PagewireCluster cluster) {
        Small p = smallPair(cluster);
        long dst = p.target().allocate(4096); // never touched: the write is answered RNR NAK
        MemoryRegion dstRegion = p.target().register(dst, 4096, RegistrationMode.ON_DEMAND, Access.all());
        assertThatThrownBy(() -> p.qp().await(p.write(p.qp(), dst, dstRegion.rkey())))
                .isInstanceOf(PagewireException.ReceiverNotReadyException.class)
                .hasMessageContaining("answered RNR NAK").hasMessageContaining("pagewire.nic.rnrRetryCount");
    }
}
