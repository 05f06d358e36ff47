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
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataGeneralizationScheme;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.aggregates.StatisticsEquivalenceClasses;
import org.deidentifier.arx.criteria.EDDifferentialPrivacy;
import org.deidentifier.arx.dp.ParameterCalculation;
import org.deidentifier.arx.metric.Metric;

/**
 * SafePub in ARX 3.9.2 (EDDifferentialPrivacy), printed as one JSON object.
 *
 * <pre>
 * java SafePubHarness --parameters 1:0.00001,2:0.000001,...
 *      k and beta of (epsilon, delta), from ARX's ParameterCalculation
 * java SafePubHarness --data adult.csv --delimiter ';' --qi age=hierarchy_age.csv ...
 *      --epsilon E --delta D (--levels COL=L,... | --degree low|medium|...) [--runs N]
 *      data-independent: ARX's deterministic sample (seed 0xDEADBEEF); prints the sampled rows
 *      (positions), the levels, the suppressed records and the classes of the sample
 * java SafePubHarness --data ... --qi ... --epsilon E --delta D --search-budget B --steps S --runs N
 *      data-dependent: N runs with fresh randomness; prints each run's levels and Loss
 * </pre>
 */
public class SafePubHarness {

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
                hierarchies.put(parts[0], parts[1]);
            } else {
                options.put(arg.substring(2), value);
            }
        }
        if (options.containsKey("parameters")) {
            List<String> rows = new ArrayList<>();
            for (String item : options.get("parameters").split(",")) {
                String[] pair = item.split(":", 2);
                ParameterCalculation calc = new ParameterCalculation(Double.parseDouble(pair[0]),
                                                                     Double.parseDouble(pair[1]));
                rows.add(String.format(Locale.ROOT, "{\"epsilon\": %s, \"delta\": %s, \"k\": %d, \"beta\": %.17g}",
                                       pair[0], pair[1], calc.getK(), calc.getBeta()));
            }
            System.out.println("{\n  \"arx\": \"3.9.2\",\n  \"parameters\": [\n    "
                               + String.join(",\n    ", rows) + "\n  ]\n}");
            return;
        }
        double epsilon = Double.parseDouble(options.get("epsilon"));
        double delta = Double.parseDouble(options.get("delta"));
        int runs = Integer.parseInt(options.getOrDefault("runs", "1"));
        List<String> results = new ArrayList<>();
        for (int run = 0; run < runs; run++) {
            char delimiter = options.getOrDefault("delimiter", ";").charAt(0);
            Data data = Data.create(new File(options.get("data")), StandardCharsets.UTF_8, delimiter);
            for (Map.Entry<String, String> qi : hierarchies.entrySet()) {
                Hierarchy hierarchy = Hierarchy.create(new File(qi.getValue()), StandardCharsets.UTF_8, ';');
                data.getDefinition().setAttributeType(qi.getKey(), hierarchy);
            }
            DataHandle input = data.getHandle();
            for (int c = 0; c < input.getNumColumns(); c++) {
                String name = input.getAttributeName(c);
                if (!hierarchies.containsKey(name)) {
                    data.getDefinition().setAttributeType(name, AttributeType.INSENSITIVE_ATTRIBUTE);
                }
            }
            ARXConfiguration config = ARXConfiguration.create();
            config.setQualityModel(Metric.createLossMetric());
            config.setSuppressionLimit(1d);
            EDDifferentialPrivacy criterion;
            boolean dependent = options.containsKey("search-budget");
            if (dependent) {
                config.setDPSearchBudget(Double.parseDouble(options.get("search-budget")));
                // --steps counts expansions (steps of the search), as the engine's option does.
                config.setHeuristicSearchStepLimit(Integer.parseInt(options.get("steps")),
                                                   ARXConfiguration.SearchStepSemantics.EXPANSIONS);
                criterion = new EDDifferentialPrivacy(epsilon, delta);
            } else {
                DataGeneralizationScheme scheme;
                if (options.containsKey("degree")) {
                    String degree = options.get("degree").toUpperCase(Locale.ROOT).replace('-', '_');
                    scheme = DataGeneralizationScheme.create(data,
                            DataGeneralizationScheme.GeneralizationDegree.valueOf(degree));
                } else {
                    scheme = DataGeneralizationScheme.create(data);
                    for (String item : options.get("levels").split(",")) {
                        String[] pair = item.split("=", 2);
                        scheme.generalize(pair[0], Integer.parseInt(pair[1]));
                    }
                }
                criterion = new EDDifferentialPrivacy(epsilon, delta, scheme, true);
            }
            config.addPrivacyModel(criterion);
            ARXResult result = new ARXAnonymizer().anonymize(data, config);
            ARXNode optimum = result.getGlobalOptimum();
            StringBuilder out = new StringBuilder("{");
            out.append("\"k\": ").append(criterion.getK());
            out.append(String.format(Locale.ROOT, ", \"beta\": %.17g", criterion.getBeta()));
            out.append(", \"milliseconds\": ").append(result.getTime());
            if (optimum != null) {
                int[] levels = optimum.getTransformation();
                String[] names = optimum.getQuasiIdentifyingAttributes();
                List<String> pairs = new ArrayList<>();
                for (int i = 0; i < names.length; i++) {
                    pairs.add("\"" + names[i] + "\": " + levels[i]);
                }
                out.append(", \"levels\": {").append(String.join(", ", pairs)).append("}");
                DataHandle output = result.getOutput(optimum, false).getView();
                StatisticsEquivalenceClasses classes = output.getStatistics().getEquivalenceClassStatistics();
                out.append(", \"suppressed\": ").append(classes.getNumberOfSuppressedRecords());
                out.append(", \"classes\": ").append(classes.getNumberOfEquivalenceClasses());
                out.append(", \"smallest_class\": ").append(classes.getMinimalEquivalenceClassSize());
                out.append(", \"loss\": ").append(Double.parseDouble(optimum.getHighestScore().toString()));
            }
            if (!dependent) {
                int[] rows = criterion.getDataSubset().getArray();
                out.append(", \"sampled_rows\": ").append(rows.length);
                StringBuilder positions = new StringBuilder();
                for (int i = 0; i < rows.length; i++) {
                    positions.append(i == 0 ? "" : ",").append(rows[i]);
                }
                out.append(", \"sample\": [").append(positions).append("]");
            }
            results.add(out.append("}").toString());
        }
        System.out.println("{\n  \"arx\": \"3.9.2\",\n  \"runs\": [\n    " + String.join(",\n    ", results) + "\n  ]\n}");
    }
}
