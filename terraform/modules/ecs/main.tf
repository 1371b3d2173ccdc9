# Strata on ECS Fargate: node tasks (writer and reader roles) behind an Application
# Load Balancer with CPU autoscaling, and a compactor service. With kafka = true the
# nodes also serve the Kafka protocol behind a Network Load Balancer (kafka.tf).
# Tasks are configured by environment alone; secrets (catalog password, API keys)
# come from Secrets Manager.
# A stop sends SIGTERM: the node stops accepting, finishes requests in flight and
# drains its writer within --shutdown-timeout (30s), inside the 40s stopTimeout and the
# target group's 35s deregistration delay.

data "aws_region" "current" {}

locals {
  port = 8080
  environment = [for k, v in merge({
    STRATA_CATALOG        = var.catalog_url
    STRATA_BUCKET         = var.bucket_url
    STRATA_LOG_FORMAT     = "json"
    STRATA_PUBLIC_METRICS = tostring(var.public_metrics)
  }, var.extra_environment) : { name = k, value = v }]
  secrets = concat(
    [{ name = "PGPASSWORD", valueFrom = "${var.catalog_secret_arn}:password::" }],
    var.api_key_count > 0 ? [{ name = "STRATA_API_KEYS", valueFrom = aws_secretsmanager_secret.api_keys[0].arn }] : [],
  )
  log_options = {
    awslogs-group         = aws_cloudwatch_log_group.this.name
    awslogs-region        = data.aws_region.current.name
    awslogs-stream-prefix = "strata"
  }
}

resource "random_password" "api_key" {
  count   = var.api_key_count
  length  = 40
  special = false
}

resource "aws_secretsmanager_secret" "api_keys" {
  count       = var.api_key_count > 0 ? 1 : 0
  name_prefix = "${var.name}-api-keys-"
  description = "Strata API keys (${var.name}), comma-separated: send one as Authorization: Bearer KEY."
  tags        = var.tags
}

resource "aws_secretsmanager_secret_version" "api_keys" {
  count         = var.api_key_count > 0 ? 1 : 0
  secret_id     = aws_secretsmanager_secret.api_keys[0].id
  secret_string = join(",", random_password.api_key[*].result)
}

resource "aws_ecs_cluster" "this" {
  name = var.name
  tags = var.tags

  setting {
    name  = "containerInsights"
    value = "disabled"
  }
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

# Roles: the execution role pulls the image, writes logs and reads the secrets; the
# task roles are what Strata itself may do.
data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "read_secrets" {
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = concat([var.catalog_secret_arn], aws_secretsmanager_secret.api_keys[*].arn)
  }
}

resource "aws_iam_role" "execution" {
  name_prefix        = "${var.name}-exec-"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

resource "aws_iam_role_policy" "execution_secrets" {
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.read_secrets.json
}

resource "aws_iam_role" "node" {
  name_prefix        = "${var.name}-node-"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "node" {
  role       = aws_iam_role.node.name
  policy_arn = var.node_policy_arn
}

resource "aws_iam_role" "compactor" {
  name_prefix        = "${var.name}-compactor-"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "compactor" {
  role       = aws_iam_role.compactor.name
  policy_arn = var.compactor_policy_arn
}

resource "aws_ecs_task_definition" "node" {
  family                   = "${var.name}-node"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.node_cpu
  memory                   = var.node_memory_mb
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.node.arn
  tags                     = var.tags

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  container_definitions = jsonencode([{
    name                   = "strata"
    image                  = var.image
    essential              = true
    command                = ["serve"]
    portMappings           = concat([{ containerPort = local.port, protocol = "tcp" }], local.kafka_port_mappings)
    environment            = concat(local.environment, [{ name = "STRATA_ROLES", value = "writer,reader" }], local.kafka_environment)
    secrets                = local.secrets
    stopTimeout            = 40
    user                   = "65532:65532"
    readonlyRootFilesystem = true
    logConfiguration       = { logDriver = "awslogs", options = local.log_options }
  }])
}

resource "aws_ecs_task_definition" "compactor" {
  family                   = "${var.name}-compactor"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.compactor_cpu
  memory                   = var.compactor_memory_mb
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.compactor.arn
  tags                     = var.tags

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  container_definitions = jsonencode([{
    name                   = "strata"
    image                  = var.image
    essential              = true
    command                = ["serve"]
    portMappings           = [{ containerPort = local.port, protocol = "tcp" }]
    environment            = concat(local.environment, [{ name = "STRATA_ROLES", value = "compactor" }])
    secrets                = local.secrets
    stopTimeout            = 40
    user                   = "65532:65532"
    readonlyRootFilesystem = true
    logConfiguration       = { logDriver = "awslogs", options = merge(local.log_options, { awslogs-stream-prefix = "compactor" }) }
  }])
}

# Load balancer.
resource "aws_security_group" "alb" {
  name_prefix = "${var.name}-alb-"
  description = "Strata load balancer"
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

# HTTPS on 443, always (the API keys cross the network); plain HTTP on 80 only when
# allow_plain_http says so. Port 80 does not even redirect by default: a redirect would
# still carry each first request, key included, in clear.
locals {
  client_ports = concat(var.certificate_arn == null ? [] : [443], var.allow_plain_http ? [80] : [])
  client_rules = { for pair in setproduct(var.allowed_cidrs, local.client_ports) : "${pair[0]}:${pair[1]}" => { cidr = pair[0], port = pair[1] } }
}

resource "aws_vpc_security_group_ingress_rule" "alb" {
  for_each          = local.client_rules
  security_group_id = aws_security_group.alb.id
  cidr_ipv4         = each.value.cidr
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  description       = "Clients"
}

resource "aws_vpc_security_group_egress_rule" "alb_to_tasks" {
  security_group_id            = aws_security_group.alb.id
  referenced_security_group_id = var.task_security_group_id
  ip_protocol                  = "tcp"
  from_port                    = local.port
  to_port                      = local.port
  description                  = "To Strata tasks"
}

resource "aws_vpc_security_group_ingress_rule" "tasks_from_alb" {
  security_group_id            = var.task_security_group_id
  referenced_security_group_id = aws_security_group.alb.id
  ip_protocol                  = "tcp"
  from_port                    = local.port
  to_port                      = local.port
  description                  = "From the Strata load balancer"
}

resource "aws_lb" "this" {
  name               = var.name
  load_balancer_type = "application"
  internal           = var.internal
  subnets            = var.public_subnet_ids
  security_groups    = [aws_security_group.alb.id]
  # Long-polls wait up to 30s and SSE tails send a heartbeat every 15s.
  idle_timeout = 65
  # A header an attacker smuggles past the balancer is dropped, not forwarded.
  drop_invalid_header_fields = true
  tags                       = var.tags

  lifecycle {
    precondition {
      condition     = var.certificate_arn != null || var.allow_plain_http
      error_message = "Give certificate_arn (an ACM certificate) for HTTPS; plain HTTP only by setting allow_plain_http = true (trials: API keys would cross the network in clear)."
    }
  }
}

resource "aws_lb_target_group" "this" {
  name                 = var.name
  port                 = local.port
  protocol             = "HTTP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  deregistration_delay = 35
  tags                 = var.tags

  health_check {
    path                = "/readyz"
    matcher             = "200"
    interval            = 10
    timeout             = 6
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }
}

resource "aws_lb_listener" "https" {
  count             = var.certificate_arn == null ? 0 : 1
  load_balancer_arn = aws_lb.this.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  certificate_arn   = var.certificate_arn

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.this.arn
  }
}

resource "aws_lb_listener" "http" {
  count             = var.allow_plain_http ? 1 : 0
  load_balancer_arn = aws_lb.this.arn
  port              = 80
  protocol          = "HTTP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.this.arn
  }
}

resource "aws_ecs_service" "node" {
  name                              = "${var.name}-node"
  cluster                           = aws_ecs_cluster.this.id
  task_definition                   = aws_ecs_task_definition.node.arn
  desired_count                     = var.min_nodes
  launch_type                       = "FARGATE"
  health_check_grace_period_seconds = 30
  tags                              = var.tags

  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [var.task_security_group_id]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.this.arn
    container_name   = "strata"
    container_port   = local.port
  }

  dynamic "load_balancer" {
    for_each = aws_lb_target_group.kafka
    content {
      target_group_arn = load_balancer.value.arn
      container_name   = "strata"
      container_port   = local.kafka_port
    }
  }

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  lifecycle {
    ignore_changes = [desired_count] # autoscaling owns it
  }

  depends_on = [aws_lb_listener.http, aws_lb_listener.https, aws_lb_listener.kafka]
}

resource "aws_ecs_service" "compactor" {
  name            = "${var.name}-compactor"
  cluster         = aws_ecs_cluster.this.id
  task_definition = aws_ecs_task_definition.compactor.arn
  desired_count   = var.compactor_count
  launch_type     = "FARGATE"
  tags            = var.tags

  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [var.task_security_group_id]
    assign_public_ip = false
  }
}

# Autoscaling on CPU.
resource "aws_appautoscaling_target" "node" {
  service_namespace  = "ecs"
  resource_id        = "service/${aws_ecs_cluster.this.name}/${aws_ecs_service.node.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.min_nodes
  max_capacity       = var.max_nodes
}

resource "aws_appautoscaling_policy" "node_cpu" {
  name               = "${var.name}-node-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.node.service_namespace
  resource_id        = aws_appautoscaling_target.node.resource_id
  scalable_dimension = aws_appautoscaling_target.node.scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = var.cpu_target_percent
    scale_in_cooldown  = 300
    scale_out_cooldown = 60

    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }
  }
}
