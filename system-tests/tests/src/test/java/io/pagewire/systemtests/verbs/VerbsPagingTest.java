package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelCounter;
import io.pagewire.kernel.KernelCounters;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A verbs program's registered memory pages like any endpoint's: on a node with 8 MiB of memory, a
 * program registers two 5 MiB ON_DEMAND buffers, so the kernel agent takes pages back from it (the
 * library unmaps them from the program when asked); the program's own touch brings them in again from
 * swap with their bytes, so does the NIC's, and MADV_DONTNEED drops them (pagewire-verbs-check paging).
 */
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class VerbsPagingTest extends SdkFixture {
    @Test
    void theKernelTakesPagesFromTheProgramAndTheyComeBackOnTouchWithTheirBytes() throws Exception {
        VerbsPrograms.requireLibrary();
        start(2, context -> context.kernel().physicalMemoryBytes(8L << 20).swapBytes(64L << 20));
        PagewireNode node = cluster.node(1);
        Run check = VerbsPrograms.run(node.target() + "," + cluster.node(2).target(), 180,
                VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-check").toString(), "paging", "5");
        KernelCounters kernel = node.kernel().counters();
        NicCounters nic = node.nic().counters();
        String counters = "kernel: unmaps asked " + kernel.get(KernelCounter.CPU_UNMAPS_REQUESTED) + ", CPU major faults "
                + kernel.get(KernelCounter.CPU_FAULTS_MAJOR) + ", swap-outs " + kernel.get(KernelCounter.SWAP_OUTS) + "\nNIC:\n" + nic;
        assertThat(check.output()).as(check.output() + "\n" + counters).doesNotContain("FAIL").contains("ok touch-brings-pages-back",
                "ok nic-reads-pages-back", "ok dontneed-drops-pages", "PASSED");
        check.succeeded();
        assertThat(kernel.get(KernelCounter.CPU_UNMAPS_REQUESTED)).as(counters).isPositive();
        assertThat(kernel.get(KernelCounter.CPU_FAULTS_MAJOR)).as("pages the program touched came back from swap; " + counters).isPositive();
        assertThat(nic.get(NicCounter.SEND_FAULTS_MINOR, RegistrationMode.ON_DEMAND) + nic.get(NicCounter.SEND_FAULTS_MAJOR, RegistrationMode.ON_DEMAND))
                .as("the NIC's READs of pages the program no longer had faulted them in; " + counters).isPositive();
    }

    /**
     * The pager inside a program that does what programs do, with userfaultfd and with the SIGSEGV
     * handler it falls back to where userfaultfd is not allowed (a container's seccomp profile): its own
     * SIGSEGV handler installed after the library's (it still gets the faults that are not the
     * library's), heap pages registered and taken back while malloc works on them (no deadlock: the
     * pager never allocates), and fork (the child gets its copies, and what it writes stays in it),
     * system() and popen() (pagewire-verbs-check harsh).
     */
    @ParameterizedTest(name = "pager {0}")
    @ValueSource(strings = {"userfaultfd", "signal"})
    void aProgramWithItsOwnHandlerMallocOnTakenPagesAndForkIsServed(String pager) throws Exception {
        VerbsPrograms.requireLibrary();
        start(2, context -> context.kernel().physicalMemoryBytes(8L << 20).swapBytes(64L << 20));
        PagewireNode node = cluster.node(1);
        Run check = VerbsPrograms.start(node.target() + "," + cluster.node(2).target(), List.of("PAGEWIRE_VERBS_PAGER=" + pager,
                "PAGEWIRE_VERBS_LOG=info"), VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-check").toString(), "harsh", "5").await(180);
        // The mechanism asked for is the one that served (userfaultfd where this kernel allows it; the node's memory file is on tmpfs).
        if (pager.equals("signal") || !check.output().contains("userfaultfd is not available")) {
            assertThat(check.output()).as(check.output()).contains(pager.equals("signal") ? "caught by the SIGSEGV handler"
                    : "caught by userfaultfd (minor faults)");
        }
        KernelCounters kernel = node.kernel().counters();
        String counters = "kernel: unmaps asked " + kernel.get(KernelCounter.CPU_UNMAPS_REQUESTED) + ", CPU major faults "
                + kernel.get(KernelCounter.CPU_FAULTS_MAJOR);
        assertThat(check.output()).as(check.output() + "\n" + counters).doesNotContain("FAIL").contains("ok malloc-on-pages-taken-back",
                "ok own-handler-gets-its-faults", "ok fork-child-writes-stay-in-child", "ok popen-runs", "PASSED");
        check.succeeded();
        assertThat(kernel.get(KernelCounter.CPU_UNMAPS_REQUESTED)).as("the node took pages back; " + counters).isPositive();
    }
}
