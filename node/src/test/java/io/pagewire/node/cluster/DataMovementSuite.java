package io.pagewire.node.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Every registration mode moves data correctly: checksummed writes and reads from 1 byte to 8 MiB, at odd addresses. */
abstract class DataMovementSuite extends ClusterFixture {
    private static final int[] SIZES = {1, 7, 4095, 4096, 4097, 65_549, (1 << 20) + 3, 8 << 20};

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void writesAndReadsLandIntactAtAnySizeAndAlignment(RegistrationMode mode) throws Exception {
        start(2, context -> context.kernel().physicalMemoryBytes(64L << 20).memlockLimitBytes(40L << 20));
        Connection c = connect(cluster.node(1), cluster.node(2));
        int largest = SIZES[SIZES.length - 1];
        long src = c.local().space().allocate(largest + 8192);
        long back = c.local().space().allocate(largest + 8192);
        long dst = c.remote().space().allocate(largest + 8192);
        MemoryRegion srcRegion = c.local().register(src, largest + 8192, mode, Access.all());
        MemoryRegion backRegion = c.local().register(back, largest + 8192, mode, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, largest + 8192, mode, Access.all());
        long id = 0;
        for (int size : SIZES) {
            int srcOffset = size % 4093 + 1;
            int dstOffset = size % 2039 + 3;
            byte[] data = pattern(size, size);
            c.local().space().store(src + srcOffset, data, 0, size);

            c.qp().post(WorkRequest.write(++id, srcRegion.lkey(), src + srcOffset, size, dst + dstOffset, dstRegion.rkey()));
            assertThat(awaitSuccess(c.cq()).bytes()).isEqualTo(size);
            byte[] landed = new byte[size];
            c.remote().space().load(dst + dstOffset, landed, 0, size);
            assertThat(crc(landed)).as("%s write of %d bytes", mode, size).isEqualTo(crc(data));

            c.qp().post(WorkRequest.read(++id, backRegion.lkey(), back + 1, size, dst + dstOffset, dstRegion.rkey()));
            awaitSuccess(c.cq());
            byte[] readBack = new byte[size];
            c.local().space().load(back + 1, readBack, 0, size);
            assertThat(crc(readBack)).as("%s read of %d bytes", mode, size).isEqualTo(crc(data));
        }
    }
}
