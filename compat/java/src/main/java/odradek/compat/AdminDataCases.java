package odradek.compat;

import static odradek.compat.Check.await;
import static odradek.compat.Check.equal;
import static odradek.compat.Check.fails;
import static odradek.compat.Check.get;
import static odradek.compat.Check.needs;
import static odradek.compat.Check.that;
import static odradek.compat.Env.WAIT;
import static odradek.compat.Env.tp;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * AdminClient over data: consumer groups, offsets, records and transactions; and the admin
 * calls of APIs odradek does not offer yet (each passes once the API exists and answers right).
 */
final class AdminDataCases {
    private AdminDataCases() {
    }

    static List<Case> cases() {
        return List.of(
                Case.quick("admin.consumer_groups", AdminDataCases::consumerGroups),
                Case.quick("admin.list_offsets", AdminDataCases::listOffsets),
                Case.full("admin.delete_records", AdminDataCases::deleteRecords),
                Case.quick("admin.transactions", AdminDataCases::transactions),
                Case.full("admin.abort_transaction", AdminDataCases::abortTransaction),
                Case.full("admin.fence_producers", AdminDataCases::fenceProducers),
                Case.full("admin.elect_leaders", AdminDataCases::electLeaders),
                Case.full("admin.partition_reassignments", AdminDataCases::partitionReassignments),
                Case.full("admin.describe_log_dirs", AdminDataCases::describeLogDirs),
                Case.full("admin.client_quotas", AdminDataCases::clientQuotas));
    }

    static void consumerGroups(Env env) throws Exception {
        String topic = env.name("groups");
        String group = env.name("group");
        env.createTopic(topic, 2);
        TopicPartition p0 = tp(topic, 0);
        TopicPartition p1 = tp(topic, 1);
        try (KafkaProducer<String, String> producer = env.producer()) {
            Env.send(producer, topic, 0, 5, "a");
            Env.send(producer, topic, 1, 5, "b");
        }
        try (KafkaConsumer<String, String> consumer = env.consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            consumer.subscribe(List.of(topic));
            Env.poll(consumer, 10);
            consumer.commitSync();
            equal(Optional.of(ConsumerGroupState.STABLE), listed(env, group, new ListConsumerGroupsOptions())
                    .map(ConsumerGroupListing::state).orElse(Optional.empty()), "the listed group's state");
            ConsumerGroupDescription d = describeGroup(env, group);
            equal(ConsumerGroupState.STABLE, d.state(), "state");
            equal("range", d.partitionAssignor(), "assignor");
            that(!d.isSimpleConsumerGroup(), "a simple group");
            equal(1, d.members().size(), "members");
            MemberDescription member = d.members().iterator().next();
            equal(Set.of(p0, p1), member.assignment().topicPartitions(), "the member's assignment");
            that(d.coordinator() != null && d.coordinator().id() >= 0, "coordinator %s", d.coordinator());
            equal(Map.of(p0, 5L, p1, 5L), committed(env, group), "committed offsets");
            fails("altering the offsets of an active group", () -> get(env.admin().alterConsumerGroupOffsets(group,
                    Map.of(p0, new OffsetAndMetadata(1))).all()), UnknownMemberIdException.class);
            fails("deleting an active group", () -> get(env.admin().deleteConsumerGroups(List.of(group)).all()),
                    GroupNotEmptyException.class);
        }
        equal(ConsumerGroupState.EMPTY, await("the group's state", WAIT, () -> describeGroup(env, group).state(),
                s -> s == ConsumerGroupState.EMPTY), "state after close");
        get(env.admin().alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(1, "moved"))).all());
        Map<TopicPartition, OffsetAndMetadata> offsets = get(env.admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata());
        equal(1L, offsets.get(p0).offset(), "p0 after alterConsumerGroupOffsets");
        equal("moved", offsets.get(p0).metadata(), "p0's metadata");
        get(env.admin().deleteConsumerGroupOffsets(group, Set.of(p1)).all());
        equal(Map.of(p0, 1L), committed(env, group), "offsets after deleteConsumerGroupOffsets(p1)");
        that(listed(env, group, new ListConsumerGroupsOptions().inStates(Set.of(ConsumerGroupState.EMPTY))).isPresent(),
                "listConsumerGroups(inStates EMPTY) lacks %s", group);
        that(listed(env, group, new ListConsumerGroupsOptions().inStates(Set.of(ConsumerGroupState.STABLE))).isEmpty(),
                "listConsumerGroups(inStates STABLE) lists %s", group);
        get(env.admin().deleteConsumerGroups(List.of(group)).all());
        that(listed(env, group, new ListConsumerGroupsOptions()).isEmpty(), "deleted group %s is listed", group);
        fails("deleting a deleted group", () -> get(env.admin().deleteConsumerGroups(List.of(group)).all()),
                GroupIdNotFoundException.class);
        equal(ConsumerGroupState.DEAD, describeGroup(env, group).state(), "a deleted group's state");
    }

    static void listOffsets(Env env) throws Exception {
        String topic = env.name("list-offsets");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        long base = System.currentTimeMillis() - 600_000;
        // Record 5 carries the latest timestamp; the first five go one by one, the rest as one batch.
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.LINGER_MS_CONFIG, 50)) {
            for (int i = 0; i < 10; i++) {
                long ts = i == 5 ? base + 50_000 : base + i * 1000L;
                var sent = producer.send(new ProducerRecord<>(topic, 0, ts, "k", "v" + i));
                if (i < 5) {
                    sent.get();
                }
            }
            producer.flush();
        }
        equal(0L, offset(env, p, OffsetSpec.earliest()).offset(), "earliest");
        equal(10L, offset(env, p, OffsetSpec.latest()).offset(), "latest");
        ListOffsetsResultInfo at = offset(env, p, OffsetSpec.forTimestamp(base + 3500));
        equal(4L, at.offset(), "the first offset at or after timestamp base+3500");
        equal(base + 4000, at.timestamp(), "its timestamp");
        equal(5L, offset(env, p, OffsetSpec.forTimestamp(base + 6500)).offset(), "the offset for base+6500");
        ListOffsetsResultInfo max = offset(env, p, OffsetSpec.maxTimestamp());
        equal(5L, max.offset(), "the offset of the max timestamp");
        equal(base + 50_000, max.timestamp(), "the max timestamp");
        equal(-1L, offset(env, p, OffsetSpec.forTimestamp(base + 60_000)).offset(), "after every timestamp");
        equal(10L, get(env.admin().listOffsets(Map.of(p, OffsetSpec.latest()),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(p)).offset(),
                "latest, read_committed");
    }

    static void deleteRecords(Env env) throws Exception {
        String topic = env.name("delete-records");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        try (KafkaProducer<String, String> producer = env.producer()) {
            Env.send(producer, topic, 0, 10, "v");
        }
        equal(4L, get(env.admin().deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(p))
                .lowWatermark(), "low watermark");
        equal(4L, offset(env, p, OffsetSpec.earliest()).offset(), "earliest after deleting before 4");
        try (KafkaConsumer<String, String> consumer = env.consumer()) {
            consumer.assign(List.of(p));
            consumer.seekToBeginning(List.of(p));
            equal("v4", Env.poll(consumer, 6).get(0).value(), "the first record left");
        }
        fails("deleting beyond the high watermark", () -> get(env.admin().deleteRecords(
                Map.of(p, RecordsToDelete.beforeOffset(11))).all()), OffsetOutOfRangeException.class);
        equal(10L, get(env.admin().deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(p))
                .lowWatermark(), "low watermark after deleting up to the high watermark (-1)");
    }

    static void transactions(Env env) throws Exception {
        String topic = env.name("txn-admin");
        String txnId = env.name("txn");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId)) {
            producer.initTransactions();
            producer.beginTransaction();
            Env.send(producer, topic, 0, 3, "t");
            TransactionListing listing = get(env.admin().listTransactions(new ListTransactionsOptions()
                    .filterStates(Set.of(TransactionState.ONGOING))).all()).stream()
                    .filter(l -> l.transactionalId().equals(txnId)).findFirst().orElse(null);
            that(listing != null, "listTransactions(ONGOING) lacks %s", txnId);
            TransactionDescription d = get(env.admin().describeTransactions(List.of(txnId)).description(txnId));
            equal(TransactionState.ONGOING, d.state(), "state");
            equal(listing.producerId(), d.producerId(), "producer id");
            equal(Set.of(p), d.topicPartitions(), "partitions");
            that(d.transactionStartTimeMs().isPresent(), "no start time");
            that(d.coordinatorId() >= 0 && d.coordinatorId() <= 2, "coordinator %d", d.coordinatorId());
            ProducerState state = producerState(env, p, d.producerId());
            equal(2, state.lastSequence(), "last sequence");
            equal(java.util.OptionalLong.of(0), state.currentTransactionStartOffset(), "the open transaction's start");
            equal(d.producerEpoch(), state.producerEpoch(), "epoch");
            producer.commitTransaction();
            // The markers are written after EndTxn is answered.
            TransactionDescription done = await("the committed transaction", WAIT,
                    () -> get(env.admin().describeTransactions(List.of(txnId)).description(txnId)),
                    t -> t.state() == TransactionState.COMPLETE_COMMIT);
            equal(Set.of(), done.topicPartitions(), "partitions after commit");
            await("the partition's open transaction after the marker", WAIT,
                    () -> producerState(env, p, d.producerId()).currentTransactionStartOffset(),
                    java.util.OptionalLong::isEmpty);
        }
    }

    static void abortTransaction(Env env) throws Exception {
        String topic = env.name("txn-abort");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                env.name("txn-abort"))) {
            producer.initTransactions();
            producer.beginTransaction();
            Env.send(producer, topic, 0, 2, "hanging");
            ProducerState open = get(env.admin().describeProducers(List.of(p)).partitionResult(p)).activeProducers()
                    .get(0);
            equal(java.util.OptionalLong.of(0), open.currentTransactionStartOffset(), "open transaction");
            get(env.admin().abortTransaction(new AbortTransactionSpec(p, open.producerId(), (short) open.producerEpoch(),
                    open.coordinatorEpoch().orElse(0))).all());
            equal(java.util.OptionalLong.empty(), producerState(env, p, open.producerId()).currentTransactionStartOffset(),
                    "the transaction after abortTransaction");
            equal(3L, get(env.admin().listOffsets(Map.of(p, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(p)).offset(),
                    "the last stable offset (two records and the marker)");
            producer.abortTransaction();
        }
        try (KafkaConsumer<String, String> consumer = env.consumer(ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                "read_committed")) {
            consumer.assign(List.of(p));
            consumer.seekToBeginning(List.of(p));
            equal(0, Env.pollFor(consumer, java.time.Duration.ofSeconds(2)).size(), "aborted records read committed");
        }
    }

    static void fenceProducers(Env env) throws Exception {
        String topic = env.name("txn-fence");
        String txnId = env.name("txn-fence");
        env.createTopic(topic, 1);
        int epoch;
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId)) {
            producer.initTransactions();
            producer.beginTransaction();
            Env.send(producer, topic, 0, 1, "zombie");
            epoch = get(env.admin().describeTransactions(List.of(txnId)).description(txnId)).producerEpoch();
            get(env.admin().fenceProducers(List.of(txnId)).all());
            fails("committing after fenceProducers", producer::commitTransaction, ProducerFencedException.class,
                    InvalidProducerEpochException.class);
        }
        // The coordinator aborts the open transaction and answers CONCURRENT_TRANSACTIONS; the
        // admin client asks again and the id ends Empty under a newer epoch (as on Kafka).
        TransactionDescription fenced = get(env.admin().describeTransactions(List.of(txnId)).description(txnId));
        equal(TransactionState.EMPTY, fenced.state(), "state after fenceProducers");
        that(fenced.producerEpoch() > epoch, "epoch %d after fencing epoch %d", fenced.producerEpoch(), epoch);
    }

    static void electLeaders(Env env) throws Exception {
        String topic = env.name("elect");
        env.createTopic(topic, 2);
        Set<TopicPartition> partitions = Set.of(tp(topic, 0), tp(topic, 1));
        Map<TopicPartition, Optional<Throwable>> result = needs("ElectLeaders", () -> get(env.admin().electLeaders(
                ElectionType.PREFERRED, partitions).partitions()));
        equal(partitions, result.keySet(), "partitions answered");
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : result.entrySet()) {
            that(e.getValue().isEmpty() || e.getValue().get() instanceof ElectionNotNeededException,
                    "%s: %s", e.getKey(), e.getValue());
        }
    }

    static void partitionReassignments(Env env) throws Exception {
        String topic = env.name("reassign");
        get(env.admin().createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(0, 1, 2))))).all());
        env.awaitTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        var ongoing = needs("ListPartitionReassignments", () -> get(env.admin().listPartitionReassignments()
                .reassignments()));
        that(!ongoing.containsKey(p), "a reassignment of %s before any: %s", p, ongoing);
        needs("AlterPartitionReassignments", () -> get(env.admin().alterPartitionReassignments(
                Map.of(p, Optional.of(new NewPartitionReassignment(List.of(1, 2, 0))))).all()));
        await("the reassigned replicas", WAIT, () -> AdminCases.ids(env.describeOrNull(topic).partitions().get(0)
                .replicas()), List.of(1, 2, 0)::equals);
    }

    static void describeLogDirs(Env env) throws Exception {
        String topic = env.name("log-dirs");
        env.createTopic(topic, 1);
        Map<Integer, Map<String, LogDirDescription>> dirs = needs("DescribeLogDirs", () -> get(env.admin()
                .describeLogDirs(List.of(0, 1, 2)).allDescriptions()));
        equal(Set.of(0, 1, 2), dirs.keySet(), "brokers answered");
        for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : dirs.entrySet()) {
            equal(1, broker.getValue().size(), "log dirs of broker " + broker.getKey());
            LogDirDescription dir = broker.getValue().values().iterator().next();
            that(dir.error() == null, "broker %d: %s", broker.getKey(), dir.error());
            that(dir.replicaInfos().containsKey(tp(topic, 0)), "broker %d's log dir lacks %s-0", broker.getKey(), topic);
        }
    }

    static void clientQuotas(Env env) throws Exception {
        String user = "quota-" + env.run;
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(
                ClientQuotaEntity.USER, user)));
        equal(Map.of(), needs("DescribeClientQuotas", () -> get(env.admin().describeClientQuotas(filter).entities())),
                "quotas before any");
        needs("AlterClientQuotas", () -> get(env.admin().alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0))))).all()));
        equal(Map.of(entity, Map.of("producer_byte_rate", 1024.0)), await("the quota", WAIT,
                () -> get(env.admin().describeClientQuotas(filter).entities()), m -> !m.isEmpty()), "quotas");
    }

    // ------------------------------------------------------------------ helpers

    static Optional<ConsumerGroupListing> listed(Env env, String group, ListConsumerGroupsOptions options)
            throws Exception {
        return get(env.admin().listConsumerGroups(options).all()).stream().filter(l -> l.groupId().equals(group))
                .findFirst();
    }

    static ConsumerGroupDescription describeGroup(Env env, String group) throws Exception {
        return get(env.admin().describeConsumerGroups(List.of(group)).describedGroups().get(group));
    }

    /**
     * The group's committed offsets (of {@code partitions} only, when given).  Asked with
     * requireStable (KIP-447): for named partitions a pending transactional offset is waited
     * for (UNSTABLE_OFFSET_COMMIT, retried by the client), not skipped.
     */
    static Map<TopicPartition, Long> committed(Env env, String group, TopicPartition... partitions) throws Exception {
        ListConsumerGroupOffsetsSpec spec = new ListConsumerGroupOffsetsSpec();
        if (partitions.length > 0) {
            spec.topicPartitions(List.of(partitions));
        }
        Map<TopicPartition, Long> offsets = new HashMap<>();
        get(env.admin().listConsumerGroupOffsets(Map.of(group, spec), new ListConsumerGroupOffsetsOptions()
                .requireStable(true)).partitionsToOffsetAndMetadata(group))
                .forEach((p, o) -> {
                    if (o != null) {
                        offsets.put(p, o.offset());
                    }
                });
        return offsets;
    }

    static ListOffsetsResultInfo offset(Env env, TopicPartition p, OffsetSpec spec) throws Exception {
        return get(env.admin().listOffsets(Map.of(p, spec)).partitionResult(p));
    }

    static ProducerState producerState(Env env, TopicPartition p, long producerId) throws Exception {
        List<ProducerState> states = get(env.admin().describeProducers(List.of(p)).partitionResult(p)).activeProducers();
        return states.stream().filter(s -> s.producerId() == producerId).findFirst().orElseThrow(
                () -> new Check.Failure("describeProducers(" + p + ") lacks producer " + producerId + ": "
                        + states.stream().map(ProducerState::toString).collect(Collectors.joining(", "))));
    }
}
