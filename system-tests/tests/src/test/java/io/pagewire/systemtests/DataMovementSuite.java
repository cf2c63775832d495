package io.pagewire.systemtests;

import static io.pagewire.node.TestData.crc;
import static io.pagewire.node.TestData.pattern;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The node-level data movement suite as an application sees it: in every registration mode,
 * checksummed writes and reads from 1 byte to 8 MiB at odd addresses land intact, through the SDK
 * on whatever cluster the binding starts.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
abstract class DataMovementSuite {
    private static final int[] SIZES = {1, 7, 4095, 4096, 4097, 65_549, (1 << 20) + 3, 8 << 20};

    /** Two nodes with room for three 8 MiB buffers each, pinned in PINNED mode. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.kernel.physicalMemoryBytes", "64MiB").set("pagewire.kernel.memlockLimitBytes", "40MiB")
                .set("pagewire.nic.ackTimeoutNs", "50ms");
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void writesAndReadsLandIntactAtAnySizeAndAlignment(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint local = cluster.node(1).connect().openEndpoint("data-" + mode);
        Endpoint remote = cluster.node(2).connect().openEndpoint("data-" + mode);
        int largest = SIZES[SIZES.length - 1];
        int span = largest + 8192;
        long src = local.allocate(span);
        long back = local.allocate(span);
        long dst = remote.allocate(span);
        MemoryRegion srcRegion = local.register(src, span, mode, Access.all());
        MemoryRegion backRegion = local.register(back, span, mode, Access.all());
        MemoryRegion dstRegion = remote.register(dst, span, mode, Access.all());
        QueuePair qp = local.connect(remote);
        for (int size : SIZES) {
            int srcOffset = size % 4093 + 1;
            int dstOffset = size % 2039 + 3;
            byte[] data = pattern(size, size);
            local.store(src + srcOffset, data);

            Completion written = qp.await(qp.write(srcRegion, src + srcOffset, size, dst + dstOffset, dstRegion.rkey()));
            assertThat(written.bytes()).isEqualTo(size);
            assertThat(crc(remote.load(dst + dstOffset, size))).as("%s write of %d bytes", mode, size).isEqualTo(crc(data));

            qp.await(qp.read(backRegion, back + 1, size, dst + dstOffset, dstRegion.rkey()));
            assertThat(crc(local.load(back + 1, size))).as("%s read of %d bytes", mode, size).isEqualTo(crc(data));
        }
        qp.close();
        local.close();
        remote.close();
    }
}
