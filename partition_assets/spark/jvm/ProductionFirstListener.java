package partition_assets.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import scala.Option;

/**
 * Production's Spark work waits for no backfill task that may still be killed: when a stage of
 * a job in the production pool is submitted, the youngest running tasks of backfill-pool stages
 * are killed, as many as the stage has tasks beyond the free cores, and Spark reschedules them
 * (SparkContext.killTaskAttempt: a killed task does not count as a failure). The FAIR scheduler
 * then gives the freed cores to production, whose pool's minShare is every core
 * (spark/scheduler_pools.py); backfill tasks take them back as production's tasks end.
 *
 * <p>Bounded: a backfill task is killed at most {@code spark.partition_assets.preemption.maxKillsPerTask}
 * times (its attempt number counts its kills: a killed attempt is run again as the next one); from
 * that attempt on it runs to its end, and production waits for it as it would without preemption.
 * A production stage kills backfill tasks as they start only while its own tasks are still to
 * start, and for {@link #PENDING_STAGE_SECONDS} at most: a {@code StageCompleted} or
 * {@code TaskStart} event the listener bus dropped (its queue full) never leaves every later
 * backfill task killed at its start.
 *
 * <p>Listener events come on one thread (Spark's listener bus), so its fields need no lock.
 *
 * <p>Not guaranteed: the killed tasks' work is done again (the backfill's cost, at most one
 * task's time per killed task); a task that does not check for interruption (a long call into
 * native code) keeps its core until it ends; the kill comes after the listener bus delivers
 * the stage's event, milliseconds late on an idle driver. The cores are the context's default
 * parallelism (a server's `spark.default.parallelism`, else its executors' cores): set lower,
 * more tasks are killed than production needs.
 */
public class ProductionFirstListener extends SparkListener {
  static final String POOL_PROPERTY = "spark.scheduler.pool";
  static final String PRODUCTION_POOL = "production";
  static final String BACKFILL_POOL = "backfill";
  static final String REASON = "preempted by a production job (partition_assets)";
  // The server conf bounding the kills of one backfill task (spark/scheduler_pools.py sets it).
  static final String MAX_KILLS_PER_TASK_CONF = "spark.partition_assets.preemption.maxKillsPerTask";
  static final int DEFAULT_MAX_KILLS_PER_TASK = 3;
  // How long a production stage's tasks may take to start after its event: Spark registers them
  // as it posts the event, so they normally have by the time the listener reads it.
  static final long PENDING_STAGE_SECONDS = 5;

  private final int maxKillsPerTask;
  private final Set<Integer> backfillStages = new HashSet<>();
  // Those that may still be killed, in the order they started: the youngest, whose kill loses
  // the least work, last.
  private final LinkedHashSet<Long> runningBackfillTasks = new LinkedHashSet<>();
  private int runningTasks = 0;
  // Production stages with tasks not started yet: how many, and when the stage was submitted.
  private final Map<Integer, PendingStage> productionTasksToStart = new HashMap<>();

  private static final class PendingStage {
    int tasksLeft;
    final long submittedNanos = System.nanoTime();

    PendingStage(int tasks) {
      tasksLeft = tasks;
    }

    boolean isStale() {
      return System.nanoTime() - submittedNanos > TimeUnit.SECONDS.toNanos(PENDING_STAGE_SECONDS);
    }
  }

  /** Spark calls this constructor with the server's conf (spark.extraListeners). */
  public ProductionFirstListener(SparkConf conf) {
    maxKillsPerTask = conf.getInt(MAX_KILLS_PER_TASK_CONF, DEFAULT_MAX_KILLS_PER_TASK);
  }

  @Override
  public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
    String pool = poolOf(submitted.properties());
    int stage = submitted.stageInfo().stageId();
    if (BACKFILL_POOL.equals(pool)) {
      backfillStages.add(stage);
    } else if (PRODUCTION_POOL.equals(pool)) {
      int tasks = submitted.stageInfo().numTasks();
      productionTasksToStart.put(stage, new PendingStage(tasks));
      Option<SparkContext> context = SparkContext$.MODULE$.getActive();
      if (context.isEmpty()) {
        return; // the context is stopping
      }
      int free = Math.max(0, context.get().defaultParallelism() - runningTasks);
      List<Long> youngestFirst = new ArrayList<>(runningBackfillTasks);
      Collections.reverse(youngestFirst);
      for (long task : youngestFirst.subList(0, Math.max(0, Math.min(youngestFirst.size(), tasks - free)))) {
        kill(task);
      }
    }
  }

  @Override
  public void onStageCompleted(SparkListenerStageCompleted completed) {
    int stage = completed.stageInfo().stageId();
    backfillStages.remove(stage);
    productionTasksToStart.remove(stage);
  }

  @Override
  public void onTaskStart(SparkListenerTaskStart started) {
    runningTasks++;
    int stage = started.stageId();
    long task = started.taskInfo().taskId();
    if (backfillStages.contains(stage)) {
      if (started.taskInfo().attemptNumber() >= maxKillsPerTask) {
        return; // killed as often as it may be: it runs to its end
      }
      // The event of a production stage comes before Spark registers its tasks: a backfill task
      // that took a freed core in between is killed in turn, until production's tasks started.
      productionTasksToStart.values().removeIf(PendingStage::isStale);
      if (productionTasksToStart.isEmpty()) {
        runningBackfillTasks.add(task);
      } else {
        kill(task);
      }
    } else {
      productionTasksToStart.computeIfPresent(stage, (key, pending) -> --pending.tasksLeft > 0 ? pending : null);
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd ended) {
    runningTasks--;
    runningBackfillTasks.remove(ended.taskInfo().taskId());
  }

  /** Kills a task attempt, which Spark runs again; nothing once the context is stopping. */
  private static void kill(long task) {
    // getActive, unlike SparkContext.getOrCreate, never starts a context (Spark-private, public in
    // bytecode; the preemption test pins it).
    Option<SparkContext> context = SparkContext$.MODULE$.getActive();
    if (context.isDefined()) {
      context.get().killTaskAttempt(task, true, REASON);
    }
  }

  private static String poolOf(Properties properties) {
    return properties == null ? null : properties.getProperty(POOL_PROPERTY);
  }
}
