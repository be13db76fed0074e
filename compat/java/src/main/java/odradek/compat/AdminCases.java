package odradek.compat;

import static odradek.compat.Check.await;
import static odradek.compat.Check.equal;
import static odradek.compat.Check.fails;
import static odradek.compat.Check.get;
import static odradek.compat.Check.that;
import static odradek.compat.Env.WAIT;
import static odradek.compat.Env.tp;

import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnacceptableCredentialException;
import org.apache.kafka.common.errors.UnknownTopicIdException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/** AdminClient: topics, partitions, configs, ACLs and SCRAM credentials. */
final class AdminCases {
    private AdminCases() {
    }

    static List<Case> cases() {
        return List.of(
                Case.quick("admin.describe_cluster", AdminCases::describeCluster),
                Case.quick("admin.create_topics", AdminCases::createTopics),
                Case.quick("admin.describe_topics", AdminCases::describeTopics),
                Case.full("admin.create_partitions", AdminCases::createPartitions),
                Case.quick("admin.topic_configs", AdminCases::topicConfigs),
                Case.full("admin.config_documentation", AdminCases::configDocumentation),
                Case.full("admin.broker_configs", AdminCases::brokerConfigs),
                Case.full("admin.acls", AdminCases::acls),
                Case.full("admin.scram_credentials", AdminCases::scramCredentials),
                Case.full("admin.delete_topics", AdminCases::deleteTopics),
                Case.full("admin.describe_features", AdminCases::describeFeatures),
                Case.full("admin.unsupported_fail_fast", AdminCases::unsupportedFailFast));
    }

    static void describeCluster(Env env) throws Exception {
        DescribeClusterResult cluster = env.admin().describeCluster(
                new DescribeClusterOptions().includeAuthorizedOperations(true));
        Collection<Node> nodes = get(cluster.nodes());
        equal(Set.of(0, 1, 2), nodes.stream().map(Node::id).collect(Collectors.toSet()), "broker ids");
        Node controller = get(cluster.controller());
        that(controller != null && nodes.contains(controller), "controller %s is not one of %s", controller, nodes);
        String id = get(cluster.clusterId());
        that(id != null && id.length() == 22, "cluster id %s", id);
        Set<AclOperation> operations = get(cluster.authorizedOperations());
        that(operations != null && operations.contains(AclOperation.DESCRIBE) && operations.contains(AclOperation.ALTER),
                "authorized cluster operations %s", operations);
    }

    static void createTopics(Env env) throws Exception {
        String topic = env.name("create");
        CreateTopicsResult created = env.admin().createTopics(List.of(new NewTopic(topic, 3, (short) 3)
                .configs(Map.of("min.insync.replicas", "2", "retention.ms", "3600000"))));
        equal(3, get(created.numPartitions(topic)), "partitions");
        equal(3, get(created.replicationFactor(topic)), "replication factor");
        Config config = get(created.config(topic));
        equal("2", config.get("min.insync.replicas").value(), "min.insync.replicas in the response");
        equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, config.get("retention.ms").source(), "retention.ms source");
        Uuid id = get(created.topicId(topic));
        that(id != null && !Uuid.ZERO_UUID.equals(id), "topic id %s", id);
        equal(id, env.awaitTopic(topic, 3).topicId(), "the described topic id");

        fails("a second create", () -> get(env.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 3))).all()),
                TopicExistsException.class);
        String checked = env.name("validate-only");
        get(env.admin().createTopics(List.of(new NewTopic(checked, 1, (short) 3)),
                new CreateTopicsOptions().validateOnly(true)).all());
        that(!get(env.admin().listTopics().names()).contains(checked), "validateOnly created %s", checked);
        fails("replication factor 4 on 3 brokers", () -> get(env.admin().createTopics(
                List.of(new NewTopic(env.name("rf4"), 1, (short) 4))).all()), InvalidReplicationFactorException.class);
        fails("an invalid config", () -> get(env.admin().createTopics(List.of(new NewTopic(env.name("badcfg"), 1,
                (short) 3).configs(Map.of("cleanup.policy", "sometimes")))).all()), InvalidConfigurationException.class);

        String assigned = env.name("assigned");
        get(env.admin().createTopics(List.of(new NewTopic(assigned,
                Map.of(0, List.of(2, 0, 1), 1, List.of(1, 2, 0))))).all());
        TopicDescription described = env.awaitTopic(assigned, 2);
        equal(List.of(2, 0, 1), ids(described.partitions().get(0).replicas()), "partition 0's replicas");
        equal(2, described.partitions().get(0).leader().id(), "partition 0's leader (its preferred replica)");

        String defaults = env.name("defaults");
        get(env.admin().createTopics(List.of(new NewTopic(defaults, Optional.empty(), Optional.empty()))).all());
        TopicDescription byDefault = env.awaitTopic(defaults, 1);
        equal(3, byDefault.partitions().get(0).replicas().size(), "default.replication.factor");
    }

    static void describeTopics(Env env) throws Exception {
        String topic = env.name("describe");
        env.createTopic(topic, 3, "min.insync.replicas", "2");
        TopicDescription d = get(env.admin().describeTopics(List.of(topic),
                new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames()).get(topic);
        equal(topic, d.name(), "name");
        that(!d.isInternal(), "%s is internal", topic);
        for (TopicPartitionInfo p : d.partitions()) {
            equal(3, p.replicas().size(), "replicas of partition " + p.partition());
            equal(new HashSet<>(p.replicas()), new HashSet<>(p.isr()), "ISR of partition " + p.partition());
            that(p.replicas().contains(p.leader()), "leader %s of partition %d", p.leader(), p.partition());
        }
        Set<AclOperation> operations = d.authorizedOperations();
        that(operations != null && operations.containsAll(Set.of(AclOperation.READ, AclOperation.WRITE)),
                "authorized topic operations %s", operations);
        TopicDescription byId = get(env.admin().describeTopics(TopicCollection.ofTopicIds(List.of(d.topicId())))
                .allTopicIds()).get(d.topicId());
        equal(topic, byId.name(), "the topic described by its id");
        that(get(env.admin().listTopics().names()).contains(topic), "listTopics lacks %s", topic);
        fails("describing a missing topic", () -> get(env.admin().describeTopics(List.of(env.name("absent")))
                .allTopicNames()), UnknownTopicOrPartitionException.class);
    }

    static void createPartitions(Env env) throws Exception {
        String topic = env.name("partitions");
        env.createTopic(topic, 2);
        get(env.admin().createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
        equal(4, env.awaitTopic(topic, 4).partitions().size(), "partitions after increaseTo(4)");
        get(env.admin().createPartitions(Map.of(topic, NewPartitions.increaseTo(5, List.of(List.of(1, 0, 2))))).all());
        equal(List.of(1, 0, 2), ids(env.awaitTopic(topic, 5).partitions().get(4).replicas()),
                "the assigned replicas of partition 4");
        fails("decreasing partitions", () -> get(env.admin().createPartitions(
                Map.of(topic, NewPartitions.increaseTo(3))).all()), InvalidPartitionsException.class);
        fails("partitions of a missing topic", () -> get(env.admin().createPartitions(
                Map.of(env.name("absent"), NewPartitions.increaseTo(3))).all()), UnknownTopicOrPartitionException.class);
    }

    @SuppressWarnings("deprecation") // alterConfigs, the legacy AlterConfigs API, is still Kafka's
    static void topicConfigs(Env env) throws Exception {
        String topic = env.name("configs");
        env.createTopic(topic, 1, "min.insync.replicas", "2");
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = describe(env, resource);
        ConfigEntry minIsr = config.get("min.insync.replicas");
        equal("2", minIsr.value(), "min.insync.replicas");
        equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, minIsr.source(), "min.insync.replicas source");
        that(minIsr.synonyms().size() >= 2 && minIsr.synonyms().get(0).source()
                == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "min.insync.replicas synonyms %s", minIsr.synonyms());
        ConfigEntry policy = config.get("cleanup.policy");
        equal("delete", policy.value(), "cleanup.policy");
        equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, policy.source(), "cleanup.policy source");
        equal(ConfigEntry.ConfigType.LIST, policy.type(), "cleanup.policy type");
        equal(ConfigEntry.ConfigType.LONG, config.get("retention.ms").type(), "retention.ms type");

        alter(env, resource, op("retention.ms", "1234567", AlterConfigOp.OpType.SET),
                op("min.insync.replicas", null, AlterConfigOp.OpType.DELETE),
                op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND));
        config = describe(env, resource);
        equal("1234567", config.get("retention.ms").value(), "retention.ms after SET");
        equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, config.get("retention.ms").source(), "retention.ms source");
        that(config.get("min.insync.replicas").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "min.insync.replicas still a topic config after DELETE: %s", config.get("min.insync.replicas"));
        equal("delete,compact", config.get("cleanup.policy").value(), "cleanup.policy after APPEND");
        alter(env, resource, op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT));
        equal("compact", describe(env, resource).get("cleanup.policy").value(), "cleanup.policy after SUBTRACT");

        get(env.admin().incrementalAlterConfigs(Map.of(resource, List.of(op("retention.ms", "1", AlterConfigOp.OpType.SET))),
                new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly(true)).all());
        equal("1234567", describe(env, resource).get("retention.ms").value(), "retention.ms after a validateOnly SET");
        fails("a value that is no number", () -> alter(env, resource, op("retention.ms", "soon", AlterConfigOp.OpType.SET)),
                InvalidConfigurationException.class, InvalidRequestException.class);
        fails("an unknown topic config", () -> alter(env, resource, op("no.such.config", "1", AlterConfigOp.OpType.SET)),
                InvalidConfigurationException.class, InvalidRequestException.class);
        ConfigResource absent = new ConfigResource(ConfigResource.Type.TOPIC, env.name("absent"));
        fails("configs of a missing topic", () -> describe(env, absent), UnknownTopicOrPartitionException.class);

        get(env.admin().alterConfigs(Map.of(resource, new Config(List.of(new ConfigEntry("retention.bytes", "1048576")))))
                .all());
        config = describe(env, resource);
        equal("1048576", config.get("retention.bytes").value(), "retention.bytes after alterConfigs");
        that(config.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "alterConfigs (which replaces a topic's configs) left retention.ms: %s", config.get("retention.ms"));
    }

    /** DescribeConfigs v3's documentation of each config (Kafka sends its ConfigDef's text). */
    static void configDocumentation(Env env) throws Exception {
        String topic = env.name("docs");
        env.createTopic(topic, 1);
        Config config = describe(env, new ConfigResource(ConfigResource.Type.TOPIC, topic));
        List<String> undocumented = config.entries().stream().filter(e -> e.documentation() == null
                || e.documentation().isEmpty()).map(ConfigEntry::name).sorted().toList();
        that(undocumented.isEmpty(), "%d of %d topic configs have no documentation, e.g. %s", undocumented.size(),
                config.entries().size(), undocumented.subList(0, Math.min(3, undocumented.size())));
    }

    static void brokerConfigs(Env env) throws Exception {
        ConfigResource broker0 = new ConfigResource(ConfigResource.Type.BROKER, "0");
        ConfigResource broker1 = new ConfigResource(ConfigResource.Type.BROKER, "1");
        ConfigResource clusterDefault = new ConfigResource(ConfigResource.Type.BROKER, "");
        ConfigEntry partitions = describe(env, broker0).get("num.partitions");
        equal("1", partitions.value(), "num.partitions");
        equal(ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG, partitions.source(), "num.partitions source");
        try {
            alter(env, clusterDefault, op("log.cleaner.backoff.ms", "20000", AlterConfigOp.OpType.SET));
            alter(env, broker1, op("log.cleaner.backoff.ms", "25000", AlterConfigOp.OpType.SET));
            ConfigEntry backoff0 = await("broker 0's log.cleaner.backoff.ms", WAIT,
                    () -> describe(env, broker0).get("log.cleaner.backoff.ms"), e -> "20000".equals(e.value()));
            equal(ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, backoff0.source(), "broker 0's source");
            ConfigEntry backoff1 = await("broker 1's log.cleaner.backoff.ms", WAIT,
                    () -> describe(env, broker1).get("log.cleaner.backoff.ms"), e -> "25000".equals(e.value()));
            equal(ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG, backoff1.source(), "broker 1's source");
            ConfigEntry defaults = describe(env, clusterDefault).get("log.cleaner.backoff.ms");
            that(defaults != null && "20000".equals(defaults.value()), "the cluster default: %s", defaults);
            fails("a static broker config", () -> alter(env, broker1, op("broker.id", "7", AlterConfigOp.OpType.SET)),
                    InvalidConfigurationException.class, InvalidRequestException.class);
        } finally {
            alter(env, broker1, op("log.cleaner.backoff.ms", null, AlterConfigOp.OpType.DELETE));
            alter(env, clusterDefault, op("log.cleaner.backoff.ms", null, AlterConfigOp.OpType.DELETE));
        }
        await("broker 1's log.cleaner.backoff.ms after the DELETEs", WAIT,
                () -> describe(env, broker1).get("log.cleaner.backoff.ms"),
                e -> e.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG);
    }

    static void acls(Env env) throws Exception {
        if (!env.secured) {
            // No authorizer: Kafka answers SECURITY_DISABLED; the SASL_SSL cluster runs the rest.
            fails("createAcls without an authorizer", () -> get(env.admin().createAcls(List.of(binding(ResourceType.TOPIC,
                    "t", PatternType.LITERAL, "User:x", "*", AclOperation.READ, AclPermissionType.ALLOW))).all()),
                    SecurityDisabledException.class);
            fails("describeAcls without an authorizer", () -> get(env.admin().describeAcls(AclBindingFilter.ANY).values()),
                    SecurityDisabledException.class);
            return;
        }
        String topic = env.name("acl");
        String alice = "User:alice-" + env.run;
        AclBinding readTopic = binding(ResourceType.TOPIC, topic, PatternType.LITERAL, alice, "*",
                AclOperation.READ, AclPermissionType.ALLOW);
        AclBinding writePrefix = binding(ResourceType.TOPIC, topic.substring(0, topic.length() - 2), PatternType.PREFIXED,
                alice, "*", AclOperation.WRITE, AclPermissionType.ALLOW);
        AclBinding denyHost = binding(ResourceType.TOPIC, topic, PatternType.LITERAL, alice, "10.9.8.7",
                AclOperation.DESCRIBE, AclPermissionType.DENY);
        AclBinding readGroup = binding(ResourceType.GROUP, env.name("acl-group"), PatternType.LITERAL, alice, "*",
                AclOperation.READ, AclPermissionType.ALLOW);
        Set<AclBinding> all = Set.of(readTopic, writePrefix, denyHost, readGroup);
        get(env.admin().createAcls(all).all());
        AclBindingFilter byAlice = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter(alice, null, AclOperation.ANY, AclPermissionType.ANY));
        equal(all, await("alice's ACLs", WAIT, () -> new HashSet<>(get(env.admin().describeAcls(byAlice).values())),
                all::equals), "alice's ACLs");
        AclBindingFilter matching = new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC, topic,
                PatternType.MATCH), AccessControlEntryFilter.ANY);
        equal(Set.of(readTopic, writePrefix, denyHost), new HashSet<>(get(env.admin().describeAcls(matching).values())),
                "ACLs that MATCH the topic");
        equal(Set.of(readTopic), new HashSet<>(get(env.admin().deleteAcls(List.of(readTopic.toFilter())).all())),
                "deleted by an exact filter");
        equal(Set.of(writePrefix, denyHost, readGroup), new HashSet<>(get(env.admin().deleteAcls(List.of(byAlice)).all())),
                "deleted by principal");
        equal(Set.of(), new HashSet<>(get(env.admin().describeAcls(byAlice).values())), "alice's ACLs after deletion");
    }

    static void scramCredentials(Env env) throws Exception {
        String user = "alice-" + env.run;
        ScramCredentialInfo sha512 = new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192);
        ScramCredentialInfo sha256 = new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096);
        get(env.admin().alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user, sha512, "alice-secret"),
                new UserScramCredentialUpsertion(user, sha256, "alice-secret"))).all());
        equal(Set.of(sha512, sha256), credentials(env, user), "alice's credentials");
        that(get(env.admin().describeUserScramCredentials().users()).contains(user), "all users lack %s", user);
        get(env.admin().alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user,
                ScramMechanism.SCRAM_SHA_256))).all());
        equal(Set.of(sha512), credentials(env, user), "alice's credentials after deleting SHA-256");
        String nobody = "nobody-" + env.run;
        fails("a user without credentials", () -> get(env.admin().describeUserScramCredentials(List.of(nobody))
                .description(nobody)), ResourceNotFoundException.class);
        fails("1024 iterations", () -> get(env.admin().alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1024), "x"))).all()),
                UnacceptableCredentialException.class);
        get(env.admin().alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user,
                ScramMechanism.SCRAM_SHA_512))).all());
        fails("a user whose credentials were deleted", () -> get(env.admin().describeUserScramCredentials(List.of(user))
                .description(user)), ResourceNotFoundException.class);
    }

    static void deleteTopics(Env env) throws Exception {
        String byName = env.name("delete-name");
        String byId = env.name("delete-id");
        env.createTopic(byName, 2);
        Uuid id = env.createTopic(byId, 1).topicId();
        get(env.admin().deleteTopics(List.of(byName)).all());
        get(env.admin().deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all());
        await("listed topics", WAIT, () -> get(env.admin().listTopics().names()),
                names -> !names.contains(byName) && !names.contains(byId));
        fails("deleting a missing topic", () -> get(env.admin().deleteTopics(List.of(env.name("absent"))).all()),
                UnknownTopicOrPartitionException.class);
        fails("deleting a missing topic id", () -> get(env.admin().deleteTopics(
                TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all()), UnknownTopicIdException.class);
    }

    static void describeFeatures(Env env) throws Exception {
        var features = get(env.admin().describeFeatures().featureMetadata());
        that(features.finalizedFeatures() != null && features.supportedFeatures() != null, "features %s", features);
    }

    /** Calls of APIs a ZooKeeper-mode broker never had fail at once, as they do against Kafka 2.8. */
    static void unsupportedFailFast(Env env) throws Exception {
        fails("describeMetadataQuorum (KRaft only)", () -> get(env.admin().describeMetadataQuorum().quorumInfo()),
                UnsupportedVersionException.class);
        fails("unregisterBroker (KRaft only)", () -> get(env.admin().unregisterBroker(0).all()),
                UnsupportedVersionException.class);
        fails("listClientMetricsResources (KIP-714)", () -> get(env.admin().listClientMetricsResources().all()),
                UnsupportedVersionException.class);
    }

    // ------------------------------------------------------------------ helpers

    static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).toList();
    }

    static Config describe(Env env, ConfigResource resource) throws Exception {
        return get(env.admin().describeConfigs(List.of(resource),
                new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all()).get(resource);
    }

    static AlterConfigOp op(String key, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(key, value), type);
    }

    static void alter(Env env, ConfigResource resource, AlterConfigOp... ops) throws Exception {
        get(env.admin().incrementalAlterConfigs(Map.of(resource, List.of(ops))).all());
    }

    static AclBinding binding(ResourceType type, String name, PatternType pattern, String principal, String host,
                              AclOperation operation, AclPermissionType permission) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
                new AccessControlEntry(principal, host, operation, permission));
    }

    static Set<ScramCredentialInfo> credentials(Env env, String user) throws Exception {
        return new HashSet<>(get(env.admin().describeUserScramCredentials(List.of(user)).description(user))
                .credentialInfos());
    }
}
