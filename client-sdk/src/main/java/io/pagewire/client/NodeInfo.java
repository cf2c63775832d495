package io.pagewire.client;

import java.util.List;

/** What a node is: its id, page size, MTU, peers and physical memory. */
public record NodeInfo(String nodeId, int pageSize, int mtu, List<String> peers, long physicalMemoryBytes) {
}
