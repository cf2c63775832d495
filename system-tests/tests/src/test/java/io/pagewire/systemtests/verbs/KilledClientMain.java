package io.pagewire.systemtests.verbs;

import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;

/**
 * A client process for {@link KilledClientTest}: opens endpoints on two nodes, pins memory, and
 * writes in a loop until it is killed. Prints READY once its workload runs.
 */
public final class KilledClientMain {
    private KilledClientMain() {
    }

    public static void main(String[] args) throws Exception {
        Pagewire first = Pagewire.connect(args[0]);
        Pagewire second = Pagewire.connect(args[1]);
        Endpoint a = first.openEndpoint("victim");
        Endpoint b = second.openEndpoint("victim-peer");
        int length = 4 << 20;
        long src = a.allocate(length);
        long dst = b.allocate(length);
        a.store(src, new byte[length]);
        MemoryRegion srcRegion = a.register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = b.register(dst, length, RegistrationMode.PIN_ON_MISS, Access.all());
        QueuePair qp = a.connect(b);
        System.out.println("READY");
        System.out.flush();
        for (long i = 0; i < 1_000_000; i++) {
            int offset = (int) (i % 64) * 65536;
            qp.write(srcRegion, src + offset, 65536, dst + offset, dstRegion.rkey());
            if (i % 32 == 31) {
                Thread.sleep(1);
            }
        }
    }
}
