package odradek.compat;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * MirrorMaker 2's offset translation as an application calls it: {@code
 * RemoteClusterUtils.translateOffsets} reads the checkpoints topic of the target cluster and
 * prints each translated offset as {@code OFFSET<tab>topic<tab>partition<tab>offset}.
 *
 * <p>Arguments: the target cluster's bootstrap servers, the source cluster's alias, the group.
 */
public final class TranslateOffsets {
    private TranslateOffsets() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: TranslateOffsets <target bootstrap servers> <source alias> <group>");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> translated =
                RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(60));
        Map<String, Long> sorted = new TreeMap<>();
        translated.forEach((tp, offset) -> sorted.put(tp.topic() + "\t" + tp.partition(), offset.offset()));
        sorted.forEach((where, offset) -> System.out.println("OFFSET\t" + where + "\t" + offset));
    }
}
