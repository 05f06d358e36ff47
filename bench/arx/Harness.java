import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.DataType;
import org.deidentifier.arx.AttributeType.MicroAggregationFunction;
import org.deidentifier.arx.DataSubset;
import org.deidentifier.arx.aggregates.StatisticsEquivalenceClasses;
import org.deidentifier.arx.criteria.DPresence;
import org.deidentifier.arx.criteria.DistinctLDiversity;
import org.deidentifier.arx.criteria.EntropyLDiversity;
import org.deidentifier.arx.criteria.EqualDistanceTCloseness;
import org.deidentifier.arx.criteria.Inclusion;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.criteria.KMap;
import org.deidentifier.arx.criteria.RecursiveCLDiversity;
import org.deidentifier.arx.metric.Metric;

/**
 * Runs ARX's optimal search on a CSV file with ARX hierarchies and prints the optimum as one
 * JSON object: the levels of the quasi-identifiers, the records suppressed, the equivalence
 * classes of the release and ARX's Loss score (default metric, gs-factor 0.5, geometric mean).
 *
 * <pre>
 * java Harness --data adult.csv --delimiter ';' --qi age=adult_hierarchy_age.csv ...
 *      --suppression-limit 0.05 [--k 5]
 *      [--k-map K (--subset FILE | --estimator poisson|zero-truncated-poisson
 *                  --significance A (--population-size N | --sampling-fraction F))]
 *      [--delta-presence DMIN,DMAX --subset FILE]
 *      [--weights COL=W,...] [--level-limits COL=MIN:MAX,...]
 *      [--microaggregate COL=mean|median|mode|interval,...] [--output OUT.csv]
 *      [--sensitive COL [--l L [--l-variant distinct|entropy|recursive [--c C]]] [--t T]]
 *      [--heuristic SECONDS [--heuristic-steps N]]
 * java Harness --derived-k yes --sample-size N --ks 2,5,... --significances 0.01,...
 *      --population-sizes 30162,301620,...
 * </pre>
 *
 * With a research subset (--subset), --data is the population table and FILE holds the released
 * rows (same header), matched to the population's rows by content (ARX's DataSubset.create);
 * suppressed records, classes and Loss then refer to the subset, as ARX's output view does.
 * Columns that are not quasi-identifiers are insensitive, except --sensitive COL, the sensitive
 * attribute of l-diversity (--l; distinct by default, entropy with ARX's Shannon estimator, or
 * recursive (c,l) with --c) and of t-closeness with equal distance (--t).
 *
 * A microaggregated quasi-identifier (--microaggregate) is typed as ARX's Integer and given
 * the aggregate function (ignoring missing values) without clustering
 * (DataDefinition.setMicroAggregationFunction(attribute, function)): the other
 * quasi-identifiers form the classes, and its values are replaced by their class's aggregate.
 * --output writes the released table (the optimum's output, suppressed records included as
 * ARX writes them) to OUT.csv with the input's delimiter.
 */
public class Harness {

    public static void main(String[] args) throws Exception {
        Map<String, String> hierarchies = new LinkedHashMap<>();
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("Expected --option VALUE, not " + arg);
            }
            String value = args[++i];
            if (arg.equals("--qi")) {
                String[] parts = value.split("=", 2);
                if (parts.length != 2) {
                    throw new IllegalArgumentException("--qi takes COLUMN=HIERARCHY.csv");
                }
                hierarchies.put(parts[0], parts[1]);
            } else {
                options.put(arg.substring(2), value);
            }
        }
        if (options.containsKey("derived-k")) {
            derivedK(options);
            return;
        }
        char delimiter = options.getOrDefault("delimiter", ";").charAt(0);

        Data data = Data.create(new File(options.get("data")), StandardCharsets.UTF_8, delimiter);
        for (Map.Entry<String, String> qi : hierarchies.entrySet()) {
            Hierarchy hierarchy = Hierarchy.create(new File(qi.getValue()), StandardCharsets.UTF_8, ';');
            data.getDefinition().setAttributeType(qi.getKey(), hierarchy);
        }
        DataHandle input = data.getHandle();
        for (int c = 0; c < input.getNumColumns(); c++) {
            String name = input.getAttributeName(c);
            if (name.equals(options.get("sensitive"))) {
                data.getDefinition().setAttributeType(name, AttributeType.SENSITIVE_ATTRIBUTE);
            } else if (!hierarchies.containsKey(name)) {
                data.getDefinition().setAttributeType(name, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }

        // Level limits: the lowest and highest level the search may choose (either side empty).
        if (options.containsKey("level-limits")) {
            for (String item : options.get("level-limits").split(",")) {
                String[] pair = item.split("=", 2);
                String[] bounds = pair[1].split(":", -1);
                if (!bounds[0].isEmpty()) {
                    data.getDefinition().setMinimumGeneralization(pair[0], Integer.parseInt(bounds[0]));
                }
                if (!bounds[1].isEmpty()) {
                    data.getDefinition().setMaximumGeneralization(pair[0], Integer.parseInt(bounds[1]));
                }
            }
        }

        // Microaggregation: an integer attribute, aggregated within the classes of the others.
        if (options.containsKey("microaggregate")) {
            for (String item : options.get("microaggregate").split(",")) {
                String[] pair = item.split("=", 2);
                MicroAggregationFunction function;
                switch (pair[1]) {
                    case "mean": function = MicroAggregationFunction.createArithmeticMean(); break;
                    case "median": function = MicroAggregationFunction.createMedian(); break;
                    case "mode": function = MicroAggregationFunction.createMode(); break;
                    case "interval": function = MicroAggregationFunction.createInterval(); break;
                    default: throw new IllegalArgumentException("Unknown function " + pair[1]);
                }
                data.getDefinition().setDataType(pair[0], DataType.INTEGER);
                data.getDefinition().setMicroAggregationFunction(pair[0], function);
            }
        }

        ARXConfiguration config = ARXConfiguration.create();
        config.setQualityModel(Metric.createLossMetric());
        // Attribute weights of the Loss (an attribute given none weighs 0.5, ARX's default).
        if (options.containsKey("weights")) {
            for (String item : options.get("weights").split(",")) {
                String[] pair = item.split("=", 2);
                config.setAttributeWeight(pair[0], Double.parseDouble(pair[1]));
            }
        }
        config.setSuppressionLimit(Double.parseDouble(options.getOrDefault("suppression-limit", "0")));
        // The heuristic search (ARX's Lightning, best first from the bottom) within a time limit
        // in seconds and, optionally, a limit on the transformations checked.
        if (options.containsKey("heuristic")) {
            config.setAlgorithm(ARXConfiguration.AnonymizationAlgorithm.BEST_EFFORT_BOTTOM_UP);
            config.setHeuristicSearchTimeLimit((int) Math.round(Double.parseDouble(options.get("heuristic")) * 1000));
            if (options.containsKey("heuristic-steps")) {
                config.setHeuristicSearchStepLimit(Integer.parseInt(options.get("heuristic-steps")));
            }
        }

        DataSubset subset = null;
        if (options.containsKey("subset")) {
            Data released = Data.create(new File(options.get("subset")), StandardCharsets.UTF_8, delimiter);
            subset = DataSubset.create(data, released);
        }
        boolean subsetUsed = false;
        KMap kmap = null;
        if (options.containsKey("k")) {
            config.addPrivacyModel(new KAnonymity(Integer.parseInt(options.get("k"))));
        }
        if (options.containsKey("k-map")) {
            int k = Integer.parseInt(options.get("k-map"));
            if (options.containsKey("estimator")) {
                KMap.CellSizeEstimator estimator = options.get("estimator").equals("poisson")
                        ? KMap.CellSizeEstimator.POISSON
                        : KMap.CellSizeEstimator.ZERO_TRUNCATED_POISSON;
                ARXPopulationModel population = options.containsKey("population-size")
                        ? ARXPopulationModel.create(Long.parseLong(options.get("population-size")))
                        : ARXPopulationModel.create(input.getNumRows(),
                                                    Double.parseDouble(options.get("sampling-fraction")));
                double significance = Double.parseDouble(options.getOrDefault("significance", "0.01"));
                kmap = new KMap(k, significance, population, estimator);
            } else {
                kmap = new KMap(k, require(subset, "--k-map without --estimator"));
                subsetUsed = true;
            }
            config.addPrivacyModel(kmap);
        }
        if (options.containsKey("delta-presence")) {
            String[] bounds = options.get("delta-presence").split(",");
            config.addPrivacyModel(new DPresence(Double.parseDouble(bounds[0]), Double.parseDouble(bounds[1]),
                                                 require(subset, "--delta-presence")));
            subsetUsed = true;
        }
        if (options.containsKey("l")) {
            String sensitive = options.get("sensitive");
            double l = Double.parseDouble(options.get("l"));
            switch (options.getOrDefault("l-variant", "distinct")) {
                case "distinct": config.addPrivacyModel(new DistinctLDiversity(sensitive, (int) l)); break;
                case "entropy": config.addPrivacyModel(new EntropyLDiversity(sensitive, l)); break;
                case "recursive":
                    config.addPrivacyModel(new RecursiveCLDiversity(sensitive, Double.parseDouble(options.get("c")), (int) l));
                    break;
                default: throw new IllegalArgumentException("Unknown l-variant " + options.get("l-variant"));
            }
        }
        if (options.containsKey("t")) {
            config.addPrivacyModel(new EqualDistanceTCloseness(options.get("sensitive"), Double.parseDouble(options.get("t"))));
        }
        if (subset != null && !subsetUsed) {
            config.addPrivacyModel(new Inclusion(subset));
        }

        ARXResult result = new ARXAnonymizer().anonymize(data, config);
        StringBuilder out = new StringBuilder();
        out.append("{\n  \"arx\": \"3.9.2\",\n  \"arguments\": [");
        for (int i = 0; i < args.length; i++) {
            out.append(i == 0 ? "" : ", ").append(quote(args[i]));
        }
        out.append("],\n  \"rows_in\": ").append(subset == null ? input.getNumRows() : subset.getArray().length);
        out.append(",\n  \"optimum_found\": ").append(result.getGlobalOptimum() != null);
        out.append(",\n  \"milliseconds\": ").append(result.getTime());
        if (options.containsKey("heuristic")) {
            out.append(",\n  \"algorithm\": \"lightning\"");
            out.append(",\n  \"optimum_proven\": ").append(result.getOptimumFound());
            out.append(",\n  \"transformations_checked\": ")
               .append(result.getProcessStatistics().getTransformationsChecked());
        }
        if (kmap != null && !kmap.isAccurate()) {
            out.append(",\n  \"derived_k\": ").append(kmap.getDerivedK());
            out.append(",\n  \"type1_error\": ").append(String.format(Locale.ROOT, "%.17g", kmap.getType1Error()));
        }
        ARXNode optimum = result.getGlobalOptimum();
        if (optimum != null) {
            DataHandle released = result.getOutput(optimum, false);
            if (options.containsKey("output")) {
                released.save(new File(options.get("output")), delimiter);
            }
            DataHandle output = released.getView();
            StatisticsEquivalenceClasses classes = output.getStatistics().getEquivalenceClassStatistics();
            int[] levels = optimum.getTransformation();
            String[] names = optimum.getQuasiIdentifyingAttributes();
            List<String> pairs = new ArrayList<>();
            for (int i = 0; i < names.length; i++) {
                pairs.add(quote(names[i]) + ": " + levels[i]);
            }
            out.append(",\n  \"levels\": {").append(String.join(", ", pairs)).append("}");
            out.append(",\n  \"suppressed\": ").append(classes.getNumberOfSuppressedRecords());
            out.append(",\n  \"classes\": ").append(classes.getNumberOfEquivalenceClasses());
            out.append(",\n  \"loss\": ").append(Double.parseDouble(optimum.getHighestScore().toString()));
        }
        out.append("\n}");
        System.out.println(out);
    }

    /**
     * Estimated k-map's derived k for every combination of --ks, --significances and
     * --population-sizes (comma-separated) at --sample-size, with both estimators: ARX's own
     * calculateKPoisson / calculateKZeroPoisson, bounded as KMap.initialize bounds them.
     */
    private static void derivedK(Map<String, String> options) throws Exception {
        int n = Integer.parseInt(options.get("sample-size"));
        List<String> rows = new ArrayList<>();
        for (String estimatorName : new String[] {"poisson", "zero-truncated-poisson"}) {
            KMap.CellSizeEstimator estimator = estimatorName.equals("poisson")
                    ? KMap.CellSizeEstimator.POISSON
                    : KMap.CellSizeEstimator.ZERO_TRUNCATED_POISSON;
            String method = estimatorName.equals("poisson") ? "calculateKPoisson" : "calculateKZeroPoisson";
            java.lang.reflect.Method calculate = KMap.class.getDeclaredMethod(method, double.class);
            calculate.setAccessible(true);
            for (String kText : options.get("ks").split(",")) {
                for (String alphaText : options.get("significances").split(",")) {
                    for (String sizeText : options.get("population-sizes").split(",")) {
                        int k = Integer.parseInt(kText);
                        double alpha = Double.parseDouble(alphaText);
                        long size = Long.parseLong(sizeText);
                        KMap kmap = new KMap(k, alpha, ARXPopulationModel.create(size), estimator);
                        double lambda = (double) n / (double) size * (double) k;
                        int derived = (Integer) calculate.invoke(kmap, lambda);
                        derived = Math.min(k, Math.min(derived, n));
                        rows.add(String.format(Locale.ROOT,
                                "{\"estimator\": \"%s\", \"k\": %d, \"significance\": %s, "
                                + "\"population_size\": %d, \"derived_k\": %d, \"type1_error\": %.17g}",
                                estimatorName, k, alphaText, size, derived, kmap.getType1Error()));
                    }
                }
            }
        }
        System.out.println("{\n  \"arx\": \"3.9.2\",\n  \"sample_size\": " + n + ",\n  \"derived\": [\n    "
                           + String.join(",\n    ", rows) + "\n  ]\n}");
    }

    private static DataSubset require(DataSubset subset, String who) {
        if (subset == null) {
            throw new IllegalArgumentException(who + " needs --subset FILE");
        }
        return subset;
    }

    private static String quote(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
