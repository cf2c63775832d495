package io.pagewire.systemtests.security;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.impl.GrpcPagewire;
import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.LaneHello;
import io.pagewire.systemtests.PrintClusterOnFailure;
import io.pagewire.systemtests.ServiceChecks;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the issue's attacker did, tried again: a process that reaches a node's port must show a
 * certificate of the testbed's CA, a lane must come from the very node its hello names, an
 * application's certificate opens no lane, a dialling node checks whom it reached, and ids nobody
 * configured are refused even in plaintext. After each refusal the real link keeps carrying writes.
 */
class MutualTlsTest {
    private EmbeddedCluster cluster;

    @RegisterExtension
    final PrintClusterOnFailure printCountersOnFailure = new PrintClusterOnFailure(() -> cluster);

    private EmbeddedCluster start(Consumer<NodeContext> configure) {
        cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.kernel().physicalMemoryBytes(8L << 20).swapBytes(0);
            configure.accept(c);
        });
        return cluster;
    }

    @AfterEach
    void stop() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void aNodeOfTheSameCaCannotClaimAPeersIdNorJoinUninvited() throws Exception {
        start(c -> { });
        PagewireNode victim = cluster.node(1);
        TestbedCertificates.Issued intruder = TestbedCertificates.in(cluster.certificates()).issueNode("node-3", List.of("localhost"));

        ManagedChannel channel = tlsChannel(victim, intruder, "node-1");
        try {
            Status claimingPeer = dialLane(channel, "node-2");
            assertThat(claimingPeer.getCode()).isEqualTo(Status.Code.PERMISSION_DENIED);
            assertThat(claimingPeer.getDescription()).contains("claiming to be node-2", "certificate names node node-3");
            Status asItself = dialLane(channel, "node-3");
            assertThat(asItself.getCode()).isEqualTo(Status.Code.PERMISSION_DENIED);
            assertThat(asItself.getDescription()).contains("not one of its peers");
        } finally {
            channel.shutdownNow();
        }
        assertThat(victim.fabric().knowsPeer("node-3")).as("no ghost peer is listed").isFalse();
        assertThat(victim.fabric().lanesRefused()).isEqualTo(2);
        assertThat(victim.registry().scrape()).contains("pagewire_security_refusals_total{node=\"node-1\",reason=\"lane\",} 2.0");
        assertRealLinkStillWrites();
    }

    @Test
    void anApplicationsCertificateOpensNoLane() throws Exception {
        start(c -> { });
        TestbedCertificates.Issued app = new TestbedCertificates.Issued(cluster.certificates().resolve("app.pem"),
                cluster.certificates().resolve("app.key"), cluster.certificates().resolve("ca.pem"));
        ManagedChannel channel = tlsChannel(cluster.node(1), app, "node-1");
        try {
            Status status = dialLane(channel, "node-2");
            assertThat(status.getCode()).isEqualTo(Status.Code.PERMISSION_DENIED);
            assertThat(status.getDescription()).contains("application app's, not a node's");
        } finally {
            channel.shutdownNow();
        }
        assertRealLinkStillWrites();
    }

    @Test
    void aCallerWithoutACertificateOfTheCaIsRefusedAtTheHandshake(@TempDir Path elsewhere) throws Exception {
        start(c -> { });
        PagewireNode node = cluster.node(1);
        ManagedChannel plaintext = NettyChannelBuilder.forTarget(node.target()).usePlaintext().build();
        ManagedChannel noCertificate = NettyChannelBuilder.forTarget(node.target(),
                TlsChannelCredentials.newBuilder().trustManager(cluster.certificates().resolve("ca.pem").toFile()).build()).build();
        TestbedCertificates.Issued stranger = TestbedCertificates.in(elsewhere).issueNode("node-2", List.of("localhost", "127.0.0.1"));
        ManagedChannel otherCa = NettyChannelBuilder.forTarget(node.target(), TlsChannelCredentials.newBuilder()
                .keyManager(stranger.certificateFile().toFile(), stranger.privateKeyFile().toFile())
                .trustManager(cluster.certificates().resolve("ca.pem").toFile()).build()).build();
        try {
            for (ManagedChannel channel : List.of(plaintext, noCertificate, otherCa)) {
                assertThatThrownBy(() -> health(channel)).isInstanceOfSatisfying(StatusRuntimeException.class,
                        e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
                // Nor a lane: not even a stranger's certificate for node-2 (another CA's) opens one as node-2.
                assertThat(dialLane(channel, "node-2").getCode()).isEqualTo(Status.Code.UNAVAILABLE);
            }
        } finally {
            plaintext.shutdownNow();
            noCertificate.shutdownNow();
            otherCa.shutdownNow();
        }
        assertThat(node.fabric().links().get("node-2").lanesOpened()).as("no lane beyond the real ones").isLessThanOrEqualTo(4);
        assertRealLinkStillWrites();
    }

    @Test
    void aDiallingNodeChecksThatTheNodeItReachedIsThePeerItMeant() {
        start(c -> { });
        Path certs = cluster.certificates();
        TestbedCertificates.Issued nodeOne = new TestbedCertificates.Issued(certs.resolve("node-1.pem"), certs.resolve("node-1.key"),
                certs.resolve("ca.pem"));
        // node-1's own credentials, at node-2's address: as node-2 it passes, as anyone else the handshake fails.
        ManagedChannel asMeant = tlsChannel(cluster.node(2), nodeOne, "node-2");
        ManagedChannel impostor = tlsChannel(cluster.node(2), nodeOne, "node-3");
        try {
            assertThat(health(asMeant).getStatus()).isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
            assertThatThrownBy(() -> health(impostor)).isInstanceOfSatisfying(StatusRuntimeException.class,
                    e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
        } finally {
            asMeant.shutdownNow();
            impostor.shutdownNow();
        }
    }

    @Test
    void theVerbsServiceNeedsTheApplicationTokenWhenOneIsSet() {
        start(c -> c.security().applicationToken("correct-horse-battery-staple"));
        PagewireNode node = cluster.node(1);
        ConnectOptions noToken = cluster.connectOptions().withSharedMemory(false);
        try (Pagewire client = Pagewire.connect(node.target(), noToken)) {
            assertThatThrownBy(client::node).isInstanceOf(PagewireException.class).hasMessageContaining("needs an application token");
        }
        try (Pagewire client = Pagewire.connect(node.target(), noToken.withSecurity(cluster.clientSecurity().withToken("guess")))) {
            assertThatThrownBy(() -> client.openEndpoint("x")).isInstanceOf(PagewireException.class)
                    .hasMessageContaining("the application token sent is not this node's");
        }
        try (Pagewire client = Pagewire.connect(node.target(), noToken.withSecurity(cluster.clientSecurity()
                .withToken("correct-horse-battery-staple")))) {
            assertThat(client.node().nodeId()).isEqualTo("node-1");
            client.openEndpoint("allowed").close();
        }
        ManagedChannel channel = cluster.openChannel(node);
        try {
            assertThat(health(channel).getStatus()).as("health needs no token (probes)").isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
        } finally {
            channel.shutdownNow();
        }
        assertThat(node.registry().scrape()).contains("pagewire_security_refusals_total{node=\"node-1\",reason=\"token\",} 2.0");
    }

    @Test
    void aNodeWithoutItsCertificateRefusesToStartAndSaysHowToFixIt() {
        NodeContext bare = new NodeContext().nodeId("node-1").transport(Transport.NETTY).port(0).metricsPort(-1);
        assertThatThrownBy(bare::conclude).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("pagewire certs --out DIR node-1").hasMessageContaining("pagewire.security.transport=plaintext");
        start(c -> { });
        NodeContext wrong = new NodeContext().nodeId("node-9").transport(Transport.NETTY).port(0).metricsPort(-1);
        wrong.security().certificateFile(cluster.certificates().resolve("node-1.pem")).privateKeyFile(cluster.certificates().resolve("node-1.key"))
                .trustedCaFile(cluster.certificates().resolve("ca.pem"));
        assertThatThrownBy(wrong::conclude).hasMessageContaining("is not node node-9's: it names node node-1");
        assertThat(new NodeContext().nodeId("node-1").transport(Transport.IN_PROCESS).conclude().security().mutualTls())
                .as("the in-process transport has no port to protect").isFalse();
    }

    @Test
    void aPlaintextNodeStillRefusesLanesFromIdsNobodyConfigured() throws Exception {
        start(c -> c.security().plaintext());
        assertThat(cluster.clientSecurity().tls()).isFalse();
        PagewireNode victim = cluster.node(1);
        ManagedChannel channel = NettyChannelBuilder.forTarget(victim.target()).usePlaintext().build();
        try {
            for (int i = 0; i < 300; i++) {
                Status status = dialLane(channel, "ghost-" + i);
                assertThat(status.getCode()).isEqualTo(Status.Code.PERMISSION_DENIED);
            }
        } finally {
            channel.shutdownNow();
        }
        assertThat(victim.fabric().links()).containsOnlyKeys("node-2");
        assertThat(victim.registry().scrape()).doesNotContain("ghost-");
        assertRealLinkStillWrites();
    }

    /** A write from node-1 to node-2 through the SDK still lands. */
    private void assertRealLinkStillWrites() throws Exception {
        ServiceChecks.assertWriteLands(cluster, 1, 2, "the real link after the refusals");
    }

    private static HealthCheckResponse health(ManagedChannel channel) {
        return HealthGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS).check(HealthCheckRequest.getDefaultInstance());
    }

    /** A channel to the node showing {@code as}'s certificate and expecting the node's to name {@code authority}. */
    private static ManagedChannel tlsChannel(PagewireNode node, TestbedCertificates.Issued as, String authority) {
        return GrpcPagewire.channelBuilder(node.target(),
                new ClientSecurity(as.caFile(), as.certificateFile(), as.privateKeyFile(), authority, "")).build();
    }

    /** Opens a lane claiming {@code nodeId}: OK when the node answers with its own hello, else the status the lane ended with. */
    private static Status dialLane(ManagedChannel channel, String nodeId) throws Exception {
        CompletableFuture<Status> outcome = new CompletableFuture<>();
        StreamObserver<LaneFrame> lane = FabricGrpc.newStub(channel).lane(new StreamObserver<>() {
            @Override
            public void onNext(LaneFrame frame) {
                outcome.complete(frame.hasHello() ? Status.OK : Status.INTERNAL.withDescription("a frame before the hello"));
            }

            @Override
            public void onError(Throwable t) {
                outcome.complete(Status.fromThrowable(t));
            }

            @Override
            public void onCompleted() {
                outcome.complete(Status.UNKNOWN.withDescription("ended without a status"));
            }
        });
        lane.onNext(LaneFrame.newBuilder().setHello(LaneHello.newBuilder().setNodeId(nodeId).setIncarnation(42)).build());
        Status status = outcome.get(15, TimeUnit.SECONDS);
        lane.onCompleted();
        return status;
    }
}
