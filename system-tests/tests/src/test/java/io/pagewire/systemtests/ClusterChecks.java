package io.pagewire.systemtests;

import io.pagewire.client.Pagewire;
import io.pagewire.node.TestData;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/** How the cluster suites read a node's meters through the SDK (test data and waiting: {@link TestData}). */
public final class ClusterChecks {
    private ClusterChecks() {
    }

    /**
     * A meter of the node summed over the series whose tags include every one given ("mode=SHADOW",
     * "kind=major"); with no tags, over all of them. 0 when the node has no such series yet.
     */
    public static double total(Pagewire node, String meter, String... tags) {
        Map<String, Double> byTags = node.stats().get(meter);
        if (byTags == null) {
            return 0;
        }
        double sum = 0;
        for (Map.Entry<String, Double> series : byTags.entrySet()) {
            List<String> have = Arrays.asList(series.getKey().split(","));
            if (have.containsAll(Arrays.asList(tags))) {
                sum += series.getValue();
            }
        }
        return sum;
    }

    /** A meter's series of the node, each as "tags=value" (what a failing or diagnostic line prints). */
    public static String byCause(Pagewire node, String meter) {
        Map<String, Double> byTags = node.stats().get(meter);
        if (byTags == null) {
            return "{}";
        }
        StringBuilder out = new StringBuilder("{");
        byTags.forEach((tags, value) -> out.append(out.length() > 1 ? ", " : "").append(tags).append('=').append(Math.round(value)));
        return out.append('}').toString();
    }
}
